// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package workerspool

import "syscall"

// yieldThread gives the thread's core to another runnable thread, if the kernel has one (as
// OpenBLAS's spinning threads do): a spinning helper on a machine shared with other work then
// costs little of that work's time.
func yieldThread() {
	syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
