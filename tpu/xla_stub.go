//go:build !xla

package tpu

import (
	"fmt"

	"github.com/gomlx/compute"
)

// xlaLinked reports whether this binary links the XLA/PJRT backend (build tag xla).
const xlaLinked = false

// newXLABackend is the stand-in of a binary built without the xla tag: the default build stays
// pure Go (no cgo, no C compiler), so the PJRT backend is opt-in at build time.
func newXLABackend(plugin string) (compute.Backend, error) {
	return nil, fmt.Errorf("tpu: new backend xla (plugin %q): this binary was built without -tags xla; "+
		"rebuild with `go build -tags xla ./cmd/temper` (needs cgo and a C compiler) and run it with "+
		"--backend xla --plugin cpu|cuda|tpu|PATH (see docs/xla.md)", plugin)
}
