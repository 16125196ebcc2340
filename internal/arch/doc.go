// Package arch holds the architecture test: imports only go down the layers of DESIGN.md
// (cmd → workers → workflows/activities → tpu → algorithms), and workflow code avoids the constructs
// that break replay (goroutines, native select, wall-clock time), and workflows link neither GoMLX
// nor the storage client (go list -deps: they import only the roles' contract packages and the
// algorithms' config leaves). It has no non-test code.
package arch
