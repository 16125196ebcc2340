// Temper fork: see third_party/README.md.

package gobackend

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) of the whole process.
func processCPU() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration { return rusageCPU(syscall.RUSAGE_THREAD) }

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
