// Package testbackend gives the tests of the algorithm packages one GoMLX backend: the pure-Go
// backend with sequential op execution (the default parallel executor can deadlock intermittently on
// the 2-core machines the tests run on). Only tests import it.
package testbackend
