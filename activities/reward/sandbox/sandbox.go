package sandbox

import (
	"cmp"
	"errors"
	"fmt"
	"time"
)

// Mode is the isolation a Sandbox achieved on this machine.
type Mode string

const (
	// ModeIsolated: new network, PID, mount, IPC and UTS namespaces; a private read-only root
	// holding only the configured read-only paths, /dev/{null,zero,random,urandom}, a fresh
	// /proc and the work directory at /work (a tmpfs of Limits.Disk bytes); plus everything in
	// ModeRestricted.
	// Network: loopback only, and down. Killing the namespace's init kills every descendant.
	ModeIsolated Mode = "isolated"
	// ModeRestricted: a dedicated unprivileged uid/gid per slot, rlimits (CPU, address space,
	// processes, file size, open files), the seccomp filter (no sockets), fresh keyrings, the
	// run's cgroup where one is writable, a private 0700 work directory as cwd and HOME, its own
	// process group, and a sweep that kills every process of the slot's uid afterwards and
	// removes its files from /tmp, /var/tmp, /dev/shm, /dev/mqueue and /run/lock. The host
	// filesystem (world-readable files, world-writable /tmp during the run) remains reachable:
	// use it only where ModeIsolated is impossible and programs are semi-trusted. See the
	// package doc.
	ModeRestricted Mode = "restricted"
)

// Verdicts of Check.
const (
	VerdictPassed = "passed"
	VerdictFailed = "failed"
)

// Limits bound one sandboxed process. Zero fields take the defaults of the Config.
type Limits struct {
	// Timeout is the wall-clock limit; the whole process tree is killed when it expires.
	Timeout time.Duration `json:"timeout,omitempty"`
	// CPUTime bounds the CPU time of the whole process tree (the run's cgroup, polled every
	// CPUTime/20 within 10-100 ms; the run is killed and fails with Limit "cpu time") and of
	// each process (RLIMIT_CPU, rounded up to whole seconds); default Timeout + 1s.
	CPUTime time.Duration `json:"cpu_time,omitempty"`
	// Memory is RLIMIT_AS in bytes. Go programs get GoAddressReserve more, because the Go
	// runtime reserves ~800 MiB of address space at start-up. Memory + Disk also bounds the
	// memory of the whole run (the run's cgroup: resident pages of every process, page cache,
	// SysV and POSIX shared memory, memfd and tmpfs pages); over it the kernel kills a process
	// of the run and the run fails with Limit "memory".
	Memory int64 `json:"memory,omitempty"`
	// Procs is the task limit (pids.max) of the run's cgroup and, 2 higher where there is one,
	// RLIMIT_NPROC for the slot's uid (threads count; at least 8).
	Procs int `json:"procs,omitempty"`
	// FileSize is RLIMIT_FSIZE in bytes.
	FileSize int64 `json:"file_size,omitempty"`
	// OpenFiles is RLIMIT_NOFILE.
	OpenFiles int `json:"open_files,omitempty"`
	// Output caps captured stdout in bytes; a program that writes more is killed and fails.
	// Stderr keeps its first 64 KiB and drops the rest.
	Output int `json:"output,omitempty"`
	// Disk is the size in bytes of the work directory, a private tmpfs holding a copy of the
	// program's files (isolated mode; a restricted sandbox writes to the host disk, bounded
	// per file by FileSize only).
	Disk int64 `json:"disk,omitempty"`
}

// GoAddressReserve is added to Limits.Memory for Go programs (see Limits.Memory).
const GoAddressReserve = 1 << 30

const stderrCap = 64 << 10

// DefaultLimits are the run defaults: 5 s wall, 512 MiB address space, 32 processes, 16 MiB
// files, 64 open files, 1 MiB of stdout, a 64 MiB work directory.
func DefaultLimits() Limits {
	return Limits{Timeout: 5 * time.Second, Memory: 512 << 20, Procs: 32, FileSize: 16 << 20, OpenFiles: 64, Output: 1 << 20, Disk: 64 << 20}
}

// DefaultBuildLimits bound `go build`: 120 s, 4 GiB per process, 256 processes, 256 MiB files.
func DefaultBuildLimits() Limits {
	return Limits{Timeout: 120 * time.Second, Memory: 4 << 30, Procs: 256, FileSize: 256 << 20, OpenFiles: 1024, Output: 1 << 20, Disk: 0}
}

// withDefaults fills zero fields from d.
func (l Limits) withDefaults(d Limits) Limits {
	l.Timeout = cmp.Or(l.Timeout, d.Timeout)
	l.CPUTime = cmp.Or(l.CPUTime, d.CPUTime, l.Timeout+time.Second)
	l.Memory = cmp.Or(l.Memory, d.Memory)
	l.Procs = cmp.Or(l.Procs, d.Procs)
	l.FileSize = cmp.Or(l.FileSize, d.FileSize)
	l.OpenFiles = cmp.Or(l.OpenFiles, d.OpenFiles)
	l.Output = cmp.Or(l.Output, d.Output)
	l.Disk = cmp.Or(l.Disk, d.Disk)
	return l
}

// Validate names the first bad field.
func (l Limits) Validate() error {
	switch {
	case l.Timeout < 0 || l.Timeout > time.Hour:
		return fmt.Errorf("sandbox: limits: timeout=%v: want 0 (default) or up to 1h", l.Timeout)
	case l.CPUTime < 0:
		return fmt.Errorf("sandbox: limits: cpu_time=%v: want >= 0", l.CPUTime)
	case l.Memory < 0 || (l.Memory > 0 && l.Memory < 16<<20):
		return fmt.Errorf("sandbox: limits: memory=%d: want 0 (default) or >= 16 MiB", l.Memory)
	case l.Procs < 0 || (l.Procs > 0 && l.Procs < 8):
		return fmt.Errorf("sandbox: limits: procs=%d: want 0 (default) or >= 8", l.Procs)
	case l.FileSize < 0:
		return fmt.Errorf("sandbox: limits: file_size=%d: want >= 0", l.FileSize)
	case l.OpenFiles < 0 || (l.OpenFiles > 0 && l.OpenFiles < 8):
		return fmt.Errorf("sandbox: limits: open_files=%d: want 0 (default) or >= 8", l.OpenFiles)
	case l.Output < 0:
		return fmt.Errorf("sandbox: limits: output=%d: want >= 0", l.Output)
	case l.Disk < 0 || (l.Disk > 0 && l.Disk < 1<<20):
		return fmt.Errorf("sandbox: limits: disk=%d: want 0 (default) or >= 1 MiB", l.Disk)
	}
	return nil
}

// Config configures a Sandbox. Zero fields take the documented defaults.
type Config struct {
	// BaseDir holds work directories and the Go build cache; default $TMPDIR/temper-sandbox
	// (temper-sandbox-k for the default uid range k > 0). New removes the stale work
	// directories of its own uids left by a crash.
	BaseDir string `json:"base_dir,omitempty"`
	// Mode: "" picks the best available (isolated, else restricted); a value requires it.
	Mode Mode `json:"mode,omitempty"`
	// UIDBase is the first of Slots+1 unprivileged uids (and gids of the same numbers): the Go
	// builder uses UIDBase and slot i runs as UIDBase+1+i, so concurrent programs can neither
	// read each other's files nor signal each other, and RLIMIT_NPROC counts each one alone.
	// Default: a range of its own (no passwd entry needed), the lowest free of
	// 1600000 + k*2048 for k < 48, claimed by a lock file under /run/temper-sandbox and held
	// while the Sandbox lives, so that two sandboxes on one host (a rollout and a reward worker,
	// or two in one process) never share a uid; BaseDir's default then ends in -k for k > 0. An
	// explicit value is used as it is: the operator keeps the ranges of a host apart.
	UIDBase int `json:"uid_base,omitempty"`
	// Slots bounds concurrent sandboxed processes (builds included); default 2.
	Slots int `json:"slots,omitempty"`
	// Python is the interpreter; default the first of /usr/bin/python3 and
	// /usr/local/bin/python3 that exists. Its installation must be readable by any user.
	Python string `json:"python,omitempty"`
	// GoRoot is the Go toolchain for Go programs; default the directory above the `go` on PATH.
	GoRoot string `json:"go_root,omitempty"`
	// GoCache is the shared build cache, written only by the builder uid (programs cannot
	// poison it); default BaseDir/gocache.
	GoCache string `json:"go_cache,omitempty"`
	// ReadOnly lists host paths visible read-only at the same path inside isolated sandboxes;
	// default /usr, /bin, /lib, /lib64, /sbin, /etc, plus GoRoot and Python's prefix when they
	// live elsewhere.
	ReadOnly []string `json:"read_only,omitempty"`
	// Limits are the defaults of each run (DefaultLimits for zero fields).
	Limits Limits `json:"limits,omitempty"`
	// BuildLimits bound `go build` (DefaultBuildLimits for zero fields).
	BuildLimits Limits `json:"build_limits,omitempty"`
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch c.Mode {
	case "", ModeIsolated, ModeRestricted:
	default:
		return fmt.Errorf("sandbox: config: mode=%q: allowed values: \"\" (best available), %s, %s", c.Mode, ModeIsolated, ModeRestricted)
	}
	if c.UIDBase < 0 || (c.UIDBase > 0 && c.UIDBase < 1000) {
		return fmt.Errorf("sandbox: config: uid_base=%d: want 0 (default) or >= 1000", c.UIDBase)
	}
	if c.Slots < 0 || c.Slots > 1024 {
		return fmt.Errorf("sandbox: config: slots=%d: want 0 (default) to 1024", c.Slots)
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("sandbox: config: limits: %w", err)
	}
	if err := c.BuildLimits.Validate(); err != nil {
		return fmt.Errorf("sandbox: config: build_limits: %w", err)
	}
	return nil
}

// Command is one process to run in a fresh sandbox.
type Command struct {
	// Path is the executable: an absolute path visible in the sandbox (under a read-only path)
	// or a path relative to the work directory ("./prog").
	Path string
	Args []string // argv[1:]
	// Env adds to (or overrides) the defaults PATH, HOME, TMPDIR (both the work directory)
	// and LANG; nothing of the worker's environment leaks in.
	Env   []string
	Stdin []byte
	// Files are written into the work directory before the start (name → content, mode 0644);
	// names must be plain file names.
	Files map[string][]byte
	// Exec lists the Files that get mode 0755.
	Exec   []string
	Limits Limits
	// Net, when set, runs the program in Net's network namespace (its loopback up, with the
	// worker's listener on it) instead of a fresh one without network, and lets it open IPv4
	// sockets: it reaches that listener and nothing else (every other socket family stays
	// denied). Isolated mode only.
	Net *Loopback
	// Mounts are host directories visible read-only inside, each at its Dst (an agent's code and
	// its packages). Isolated mode only.
	Mounts []Mount
	// Dir is the working directory, a path inside (default the work directory, which stays HOME
	// and TMPDIR).
	Dir string
	// AddressSpace raises RLIMIT_AS above Limits.Memory for runtimes that reserve address space
	// they never touch (Node's fetch reserves WebAssembly guard regions: it needs 16 GiB); the
	// run's memory stays bounded by Limits.Memory + Limits.Disk through its cgroup, where there
	// is one (ModeReason says when there is not).
	AddressSpace int64
	// treeMemory overrides the run's cgroup memory limit (default Limits.Memory + Limits.Disk);
	// Go runs set it so that their address-space reserve does not raise it.
	treeMemory int64
}

// Mount is a host directory (Src) bound read-only inside a sandbox at Dst.
type Mount struct {
	Src string `json:"src"`
	Dst string `json:"dst"`
}

// Limits a run can hit (Result.Limit).
const (
	LimitCPU    = "cpu time"
	LimitMemory = "memory"
	LimitProcs  = "processes"
)

// Result is what one sandboxed process did.
type Result struct {
	ExitCode int    `json:"exit_code"`        // -1 when killed by a signal
	Signal   string `json:"signal,omitempty"` // e.g. "killed", "CPU time limit exceeded"
	Stdout   []byte `json:"-"`
	Stderr   []byte `json:"-"`
	// OutputExceeded: stdout went over Limits.Output; the process was killed.
	OutputExceeded bool `json:"output_exceeded,omitempty"`
	TimedOut       bool `json:"timed_out,omitempty"`
	// Limit names the limit a failed run hit: LimitCPU (the tree's CPU time, or RLIMIT_CPU),
	// LimitMemory or LimitProcs (of the run's cgroup); "" otherwise.
	Limit   string        `json:"limit,omitempty"`
	Elapsed time.Duration `json:"elapsed"`
	Mode    Mode          `json:"mode"`
}

// Failure returns why a run failed ("output limit exceeded", "cpu time limit exceeded",
// "memory limit exceeded", "timeout", "timeout at the process limit", "process limit reached",
// "killed by signal ...",
// "exit status 1"), or "" when it exited with status 0 in time within its limits.
func (r Result) Failure() string {
	switch {
	case r.OutputExceeded:
		return "output limit exceeded"
	case r.Limit == LimitCPU:
		return "cpu time limit exceeded"
	case r.Limit == LimitMemory:
		return "memory limit exceeded"
	case r.TimedOut && r.Limit == LimitProcs: // a fork bomb: it stalled at the task limit
		return "timeout at the process limit"
	case r.TimedOut:
		return "timeout"
	case r.Limit == LimitProcs:
		return "process limit reached"
	case r.Signal != "":
		return "killed by signal: " + r.Signal
	case r.ExitCode != 0:
		return fmt.Sprintf("exit status %d", r.ExitCode)
	}
	return ""
}

// ErrUnavailable means no sandbox mode can be established on this machine.
var ErrUnavailable = errors.New("sandbox unavailable")
