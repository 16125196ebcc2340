//go:build !unix

package bench

import (
	"errors"
	"time"
)

func processCPUTime() (time.Duration, error) {
	return 0, errors.New("read process cpu time: not implemented on this system")
}

// haveCPUTime says processCPUTime works here: not off unix, where the report has no CPU-second rates.
const haveCPUTime = false
