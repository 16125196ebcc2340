// Package sandbox runs untrusted programs (Python 3, Go) against test cases for code rewards.
//
// Contract:
//   - Each run gets a fresh private work directory (cwd and HOME; in isolated mode a
//     size-limited tmpfs holding a copy of the program's files, so nothing reaches the host
//     disk), a dedicated unprivileged uid per slot (so RLIMIT_NPROC applies and concurrent runs
//     cannot read or signal each other), rlimits on CPU seconds, address space, processes, file
//     size and open files, a wall-clock timeout that kills the whole tree, and stdout capped
//     (over the cap = killed and failed).
//   - Mode is chosen once by New with a probe: ModeIsolated adds network, PID, mount, IPC and UTS
//     namespaces and a private read-only root (no host files beyond /usr, /etc and the
//     toolchains; no /tmp; no network); ModeRestricted is the documented fallback without
//     namespaces. Not root = ErrUnavailable: there is no unprotected mode.
//   - The setup runs in a helper: a binary that links this package re-executes itself
//     (/proc/self/exe) with TEMPER_SANDBOX_HELPER set; this package's init turns that process
//     into the helper, which builds the sandbox as root, drops privileges and execs the program.
//   - Go programs are built by a separate builder uid that alone writes the shared GOCACHE
//     (GOTOOLCHAIN=local, GOFLAGS=-mod=mod, GOPROXY=off, CGO_ENABLED=0), then run as a slot uid:
//     a program can never poison the cache later builds use.
//   - Errors are for the sandbox itself; what a program does is a Result or Report verdict.
//
// Linux only; New returns ErrUnavailable elsewhere.
package sandbox
