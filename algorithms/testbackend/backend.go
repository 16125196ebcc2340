package testbackend

import (
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"
)

// Sequential is the process's pure-Go backend with sequential op execution, made on first use; it
// panics when the backend cannot be made (a test cannot run without it).
var Sequential = sync.OnceValue(func() compute.Backend {
	b, err := gobackend.New("ops_sequential")
	if err != nil {
		panic(err)
	}
	return b
})
