//go:build unix

package bench

import (
	"fmt"
	"syscall"
	"time"
)

// processCPUTime is the CPU time (user + system) of every thread of this process so far.
func processCPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("read process cpu time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// haveCPUTime says processCPUTime works here.
const haveCPUTime = true
