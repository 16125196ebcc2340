package sandbox

import (
	"fmt"
	"slices"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM in every sandboxed process: what Docker's default profile
// denies to a container without added capabilities, plus what a test-case program never needs
// and could use to reach past its run (keyrings, SysV and POSIX message IPC that outlive it in
// restricted mode, sockets: every socket() whatever the family, so no host Unix socket under a
// read-only bind and, in restricted mode, no network). The kernel would refuse most of these to
// an unprivileged uid anyway; the filter also covers what it would not (unprivileged user
// namespaces, io_uring, userfaultfd, keyrings, ptrace of one's own children).
var deniedSyscalls = []string{
	// kernel keyrings are not namespaced: a key outlives the run and other uids may see it
	"keyctl", "add_key", "request_key",
	// namespaces and mounts
	"unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	// tracing and reading other processes
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "perf_event_open",
	"bpf", "lookup_dcookie", "syslog", "fanotify_init", "open_by_handle_at", "name_to_handle_at",
	// kernel modules, reboot, swap, accounting, quotas
	"init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms",
	"query_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
	"quotactl", "quotactl_fd", "nfsservctl", "_sysctl", "sysfs", "uselib", "ustat", "iopl",
	"ioperm", "vhangup", "sethostname", "setdomainname",
	// clocks
	"clock_settime", "clock_adjtime", "settimeofday", "adjtimex",
	// memory the run's limits do not see, or other NUMA nodes' placement
	"userfaultfd", "memfd_secret", "mbind", "set_mempolicy", "migrate_pages", "move_pages",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// IPC objects that outlive a restricted run (isolated runs have their own IPC namespace)
	"shmget", "semget", "msgget", "mq_open",
	// sockets (socketpair stays: pipes between a program's own processes)
	"socket",
}

// cloneNamespaceFlags are the clone flags that make new namespaces (NEWNS, NEWCGROUP, NEWUTS,
// NEWIPC, NEWUSER, NEWPID, NEWNET): clone with any of them fails with EPERM. clone3 passes its
// flags in memory the filter cannot read, so it fails with ENOSYS and libc falls back to clone.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// sockFilter is one classic BPF instruction as the kernel reads it (JSON-friendly for the spec).
type sockFilter struct {
	Code uint16 `json:"c"`
	Jt   uint8  `json:"t,omitempty"`
	Jf   uint8  `json:"f,omitempty"`
	K    uint32 `json:"k,omitempty"`
}

// buildFilter assembles the sandbox's seccomp program with github.com/elastic/go-seccomp-bpf
// (a deny list over the native architecture, x32 calls refused) and puts an architecture check
// in front of it: the library lets calls of a foreign architecture through (int 0x80 from an
// x86-64 process), this program kills the process instead.
//
// With inet (a run given a Loopback), socket() is allowed for AF_INET only: the run's network
// namespace holds nothing but its loopback and the worker's listener.
func buildFilter(inet bool) ([]sockFilter, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	denied := deniedSyscalls
	var sockets []seccomp.NameWithConditions
	if inet {
		denied = slices.DeleteFunc(slices.Clone(deniedSyscalls), func(n string) bool { return n == "socket" })
		sockets = append(sockets, seccomp.NameWithConditions{Name: "socket",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.NotEqual, Value: unix.AF_INET}}})
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: denied},
			{Action: seccomp.ActionErrno, NamesWithCondtions: []seccomp.NameWithConditions{{
				Name:       "clone",
				Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNamespaceFlags}},
			}}},
			{Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS), Names: []string{"clone3"}},
		},
	}
	if len(sockets) > 0 {
		policy.Syscalls = append(policy.Syscalls, seccomp.SyscallGroup{Action: seccomp.ActionErrno, NamesWithCondtions: sockets})
	}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	prog := append([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionKillProcess)},
	}, insts...)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble: %w", err)
	}
	out := make([]sockFilter, len(raw))
	for i, r := range raw {
		out[i] = sockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// seccompSupported reports whether this kernel has seccomp filters.
func seccompSupported() bool { return seccomp.Supported() }

// loadFilter installs prog on every thread of the calling process; no_new_privs must be set.
func loadFilter(prog []unix.SockFilter) syscall.Errno {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, e := syscall.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	return e
}
