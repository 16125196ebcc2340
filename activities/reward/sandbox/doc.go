// Package sandbox runs untrusted programs (Python 3, Go) against test cases for code rewards.
//
// Contract:
//   - Mode is chosen once by New with a probe: ModeIsolated where namespaces work, else the
//     documented fallback ModeRestricted. Not root = ErrUnavailable: there is no unprotected
//     mode. ModeReason names what is missing on this machine (a better mode, seccomp, cgroups).
//   - The setup runs in a helper: a binary that links this package re-executes itself
//     (/proc/self/exe) with TEMPER_SANDBOX_HELPER set; this package's init turns that process
//     into the helper, which builds the sandbox as root, drops privileges and execs the program.
//   - Errors are for the sandbox itself; what a program does is a Result or Report verdict
//     (Result.Failure and Result.Limit name the limit a run hit).
//
// Protections, and the mode in which each holds (I = isolated, R = restricted):
//   - I+R  a dedicated unprivileged uid/gid per slot (builds: a builder uid); no supplementary
//     groups; no_new_privs; only stdin, stdout and stderr are inherited; the parent-death
//     signal kills the program with its worker. Concurrent runs cannot read or signal each other.
//     Without an explicit uid_base each Sandbox claims a uid range of its own (a lock file under
//     /run/temper-sandbox, held while it lives: uidrange_linux.go), so the sandboxes of two
//     workers on one host never share a uid and one's end-of-run sweep never kills the other's runs.
//   - I+R  rlimits per process: CPU seconds, address space, RLIMIT_NPROC per uid, file size,
//     open files, no core files.
//   - I+R  a wall-clock timeout and an stdout cap that kill the whole tree; stderr keeps 64 KiB.
//   - I+R  where a cgroup is writable (v2 with memory and pids delegated, else v1 memory, pids
//     and cpuacct; the run's cgroup is joined by the helper before anything else): memory of
//     the whole tree counting SysV/POSIX shared memory, memfd and tmpfs pages (Memory + Disk;
//     no swap), a task limit (Procs) and CPU time of the whole tree (CPUTime, polled). Without
//     one, ModeReason says so and only the per-process rlimits hold.
//   - I+R  a seccomp filter installed last before exec (built with
//     github.com/elastic/go-seccomp-bpf; default allow, deny list in seccomp_linux.go): EPERM
//     for keyrings, mount and namespace calls (clone with namespace flags too; clone3 gets
//     ENOSYS), ptrace and process_vm_*, bpf, perf_event_open, kernel modules, kexec, reboot,
//     swap, clocks, userfaultfd, io_uring, SysV IPC and POSIX message queues, socket() of any
//     family (no host Unix socket under a read-only bind, no network in restricted mode), and
//     more; foreign-architecture syscalls (int 0x80) kill the process. Kernels without seccomp:
//     ModeReason says so.
//   - I+R  a fresh anonymous session keyring per run, joined before privileges are dropped, and
//     the slot uid's user, user-session and persistent keyrings emptied before exec: nothing of
//     the worker's or an earlier run's keys is reachable even without seccomp.
//   - I    an agent's run (Command.Net, a Loopback) joins a network namespace the worker made
//     instead, whose only interface is its loopback, up, with one listener of the worker's on it;
//     the seccomp filter then allows socket() for AF_INET only. It reaches that listener, and
//     nothing else. Command.Mounts (read-only binds of host directories) and Command.Dir (the
//     working directory) give it its code; Command.AddressSpace raises RLIMIT_AS alone for
//     runtimes that reserve address space they never touch (Node), the cgroup still bounding
//     memory.
//   - I    network, PID, mount, IPC and UTS namespaces: no network (loopback down), the program
//     is PID 1 of its namespace (killing it kills every descendant, setsid or not), SysV IPC
//     dies with the run.
//   - I    a private read-only root (nosuid, nodev) holding only the configured read-only paths
//     (/usr, /etc and the toolchains), /dev/{null,zero,random,urandom}, a fresh /proc and the
//     work directory at /work: a size-limited tmpfs (Disk) with a copy of the program's files.
//     No /tmp, /dev/shm or /sys; nothing reaches the host disk.
//   - R    a private 0700 work directory on the host as cwd and HOME, its own process group,
//     then a sweep that kills every process of the slot's uid and removes what it left at the
//     top of /tmp, /var/tmp, /dev/shm, /dev/mqueue and /run/lock. World-readable host files
//     and the host's /proc (other processes' command lines) remain readable: use it only
//     where ModeIsolated is impossible and programs are semi-trusted.
//   - I+R  Go programs are built by the builder uid that alone writes the shared GOCACHE
//     (GOTOOLCHAIN=local, GOFLAGS=-mod=mod, GOWORK=off, GOPROXY=off, CGO_ENABLED=0), then run as
//     a slot uid: a program can never poison the cache, nor a go.work break later builds.
//   - I+R  Go test mode (Program.GoTest) is judged from the test binary's test2json events, not
//     its exit status: every test the harness defines must pass, the counts must match, and a
//     random-named test added last must pass; the solution may import only a fixed list of
//     packages that cannot end the process, change its flags or read its memory (gotest.go).
//
// Linux only; New returns ErrUnavailable elsewhere.
package sandbox
