package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// helperEnv carries the helper spec. A binary that links this package turns into the sandbox
// helper when started with it (see init): the parent re-executes itself (/proc/self/exe) inside
// fresh namespaces, the helper builds the sandbox while still root, drops to the slot's uid and
// execs the program. Doing the setup in a child keeps the parent's mounts, limits and
// credentials untouched, and needs no external tool.
const helperEnv = "TEMPER_SANDBOX_HELPER"

// statusFD is where the helper reports a setup failure; it is close-on-exec, so the parent sees
// EOF with no bytes exactly when the program was exec'd.
const statusFD = 3

// netNSFD is the network namespace a run with a Loopback joins (helperSpec.NetNS).
const netNSFD = 4

// Linux resource numbers (the syscall package lacks some).
const (
	rlimitCPU    = 0
	rlimitFSIZE  = 1
	rlimitCORE   = 4
	rlimitNPROC  = 6
	rlimitNOFILE = 7
	rlimitAS     = 9
)

const (
	prSetPdeathsig  = 1
	prSetNoNewPrivs = 38
)

type rlimit struct {
	Resource int    `json:"r"`
	Cur      uint64 `json:"c"`
	Max      uint64 `json:"m"`
}

type bindMount struct {
	Src string `json:"src"` // host path
	Dst string `json:"dst"` // path inside
	// TmpfsSize > 0 makes Dst a private tmpfs of that many bytes holding a copy of Src's
	// regular files instead of a bind: writes never reach the host disk.
	TmpfsSize int64 `json:"tmpfs_size,omitempty"`
	ReadOnly  bool  `json:"read_only,omitempty"` // a read-only bind (Command.Mounts)
}

// helperSpec is everything the helper needs, passed as JSON in helperEnv.
type helperSpec struct {
	Isolated bool        `json:"isolated"`
	Root     string      `json:"root,omitempty"`      // empty host dir to mount the new root on
	ReadOnly []string    `json:"read_only,omitempty"` // host paths bound read-only at the same path
	Binds    []bindMount `json:"binds,omitempty"`     // writable binds
	Dir      string      `json:"dir"`                 // working directory (inside path)
	UID      int         `json:"uid"`
	GID      int         `json:"gid"`
	Rlimits  []rlimit    `json:"rlimits"`
	Path     string      `json:"path"`
	Argv     []string    `json:"argv"`
	Env      []string    `json:"env"`
	// Cgroups are the run's cgroup.procs files: the helper joins them first, so that everything
	// the program does is counted.
	Cgroups []string `json:"cgroups,omitempty"`
	// Filter is the seccomp program installed last before exec (none when empty).
	Filter []sockFilter `json:"filter,omitempty"`
	// KillAll: become UID and kill every process it can signal, then exit.
	KillAll bool `json:"kill_all,omitempty"`
	// NetNS: join the network namespace open at netNSFD (a Loopback's) before anything else.
	NetNS bool `json:"net_ns,omitempty"`
}

func init() {
	raw, ok := os.LookupEnv(helperEnv)
	if !ok {
		return
	}
	runHelper(raw) // never returns
}

func runHelper(raw string) {
	runtime.LockOSThread() // prctl and exec below apply to this thread
	debug.SetGCPercent(-1) // no collection may start once the limits are set
	status := os.NewFile(statusFD, "status")
	die := func(format string, args ...any) {
		if status != nil {
			fmt.Fprintf(status, format, args...)
		}
		os.Exit(126)
	}
	syscall.CloseOnExec(statusFD)
	var sp helperSpec
	if err := json.Unmarshal([]byte(raw), &sp); err != nil {
		die("sandbox helper: decode spec: %v", err)
	}
	if sp.KillAll {
		killAll(sp.UID, sp.GID)
	}
	for _, f := range sp.Cgroups {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			die("sandbox helper: join cgroup: %v", err)
		}
	}
	// A fresh anonymous session keyring (a NULL name never joins an existing one): the program
	// must not reach the worker's. Kernels without keys fail here; there is nothing to leak then.
	_, _, _ = syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	if sp.NetNS {
		if err := unix.Setns(netNSFD, unix.CLONE_NEWNET); err != nil {
			die("sandbox helper: join the loopback's network namespace: %v", err)
		}
		_ = syscall.Close(netNSFD)
	}
	if sp.Isolated {
		if err := buildRoot(sp); err != nil {
			die("sandbox helper: %v", err)
		}
		_ = syscall.Sethostname([]byte("sandbox"))
	}
	if err := syscall.Chdir(sp.Dir); err != nil {
		die("sandbox helper: chdir %s: %v", sp.Dir, err)
	}
	closeExtraFDs()
	if err := syscall.Setgroups([]int{}); err != nil {
		die("sandbox helper: setgroups: %v", err)
	}
	if err := syscall.Setresgid(sp.GID, sp.GID, sp.GID); err != nil {
		die("sandbox helper: setresgid %d: %v", sp.GID, err)
	}
	if err := syscall.Setresuid(sp.UID, sp.UID, sp.UID); err != nil {
		die("sandbox helper: setresuid %d: %v", sp.UID, err)
	}
	if os.Getuid() != sp.UID || os.Geteuid() != sp.UID {
		die("sandbox helper: uid is still %d/%d, want %d", os.Getuid(), os.Geteuid(), sp.UID)
	}
	if err := clearKeyrings(); err != nil {
		die("sandbox helper: %v", err)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		die("sandbox helper: no_new_privs: %v", e)
	}
	// Changing credentials clears the parent-death signal; set it again so that a dying worker
	// takes its sandboxes along.
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetPdeathsig, uintptr(syscall.SIGKILL), 0)
	// Limits go last, with nothing allocated after them: under RLIMIT_AS this Go process may
	// not be able to map a single new page, and the program's image starts fresh at exec.
	path, err := syscall.BytePtrFromString(sp.Path)
	if err != nil {
		die("sandbox helper: path %q: %v", sp.Path, err)
	}
	argv, err := syscall.SlicePtrFromStrings(sp.Argv)
	if err != nil {
		die("sandbox helper: argv: %v", err)
	}
	envv, err := syscall.SlicePtrFromStrings(sp.Env)
	if err != nil {
		die("sandbox helper: env: %v", err)
	}
	if len(sp.Filter) > 0 {
		prog := make([]unix.SockFilter, len(sp.Filter))
		for i, f := range sp.Filter {
			prog[i] = unix.SockFilter{Code: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
		}
		if e := loadFilter(prog); e != 0 {
			die("sandbox helper: seccomp: %v", e)
		}
	}
	lims := make([]syscall.Rlimit, len(sp.Rlimits))
	for i, l := range sp.Rlimits {
		lims[i] = syscall.Rlimit{Cur: l.Cur, Max: l.Max}
	}
	for i, l := range sp.Rlimits {
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRLIMIT, uintptr(l.Resource), uintptr(unsafe.Pointer(&lims[i])), 0); e != 0 {
			die("sandbox helper: setrlimit %d: %v", l.Resource, e)
		}
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_EXECVE, uintptr(unsafe.Pointer(path)),
		uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	// Only reached when exec failed; the limits may leave too little memory to format a message.
	msg := execFailed[:]
	if e == syscall.ENOENT {
		msg = execNotFound[:]
	}
	syscall.RawSyscall(syscall.SYS_WRITE, statusFD, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)))
	syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 127, 0, 0)
}

var (
	execFailed   = [...]byte{'s', 'a', 'n', 'd', 'b', 'o', 'x', ' ', 'h', 'e', 'l', 'p', 'e', 'r', ':', ' ', 'e', 'x', 'e', 'c', ' ', 'f', 'a', 'i', 'l', 'e', 'd'}
	execNotFound = [...]byte{'s', 'a', 'n', 'd', 'b', 'o', 'x', ' ', 'h', 'e', 'l', 'p', 'e', 'r', ':', ' ', 'e', 'x', 'e', 'c', ':', ' ', 'n', 'o', ' ', 's', 'u', 'c', 'h', ' ', 'f', 'i', 'l', 'e'}
)

// clearKeyrings empties the keyrings that belong to the uid rather than to a process (user,
// user-session and persistent keyrings): they outlive a run, and the next run of the slot must
// not find what an earlier one stored there, even where seccomp is unavailable to deny keyctl.
func clearKeyrings() error {
	for _, ring := range []int{unix.KEY_SPEC_USER_KEYRING, unix.KEY_SPEC_USER_SESSION_KEYRING} {
		_, _, _ = syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_CLEAR, uintptr(ring), 0)
	}
	// The persistent keyring is reached by linking it into the (fresh) session keyring.
	session := unix.KEY_SPEC_SESSION_KEYRING
	id, _, e := syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_PERSISTENT, ^uintptr(0), uintptr(session))
	if e == 0 {
		_, _, _ = syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_CLEAR, id, 0)
		_, _, _ = syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_UNLINK, id, uintptr(session))
	}
	return awaitKeyGC(uint64(id), e == 0)
}

// keyGCWait bounds how long a run waits for the keys an earlier run left to be freed.
const keyGCWait = 2 * time.Second

// awaitKeyGC waits until no key of this uid is left but its own keyrings (user, user-session,
// the fresh session keyring and the persistent one). Clearing a keyring unlinks its keys at once,
// but the kernel frees them later, from a work queue: until then a program that finds a key's
// serial in /proc/keys can still read it, so a run right after another on the same slot could
// read what the earlier one stored (seen on a 6.18 kernel). A key still alive after keyGCWait
// ends the run with an error rather than expose it. In the isolated root /proc/keys is masked
// (buildRoot): there the file reads empty and no serial can be found, so this wait guards the
// restricted mode, whose /proc is the host's.
func awaitKeyGC(persistent uint64, hasPersistent bool) error {
	own := map[uint64]bool{}
	if hasPersistent {
		own[persistent] = true
	}
	for _, ring := range []int{unix.KEY_SPEC_USER_KEYRING, unix.KEY_SPEC_USER_SESSION_KEYRING, unix.KEY_SPEC_SESSION_KEYRING} {
		if id, _, e := syscall.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(ring), 0); e == 0 {
			own[uint64(id)] = true
		}
	}
	uid := strconv.Itoa(os.Getuid())
	deadline := time.Now().Add(keyGCWait)
	for {
		b, err := os.ReadFile("/proc/keys")
		if err != nil {
			return nil // no /proc/keys (no keys support, or no proc): nothing lists a serial to read
		}
		left := leftoverKeys(string(b), uid, own)
		if left == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a key of an earlier run is still alive after %s: %s", keyGCWait, left)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// leftoverKeys returns the first line of /proc/keys (keys) that belongs to uid and is not one of
// own (serials), or "".
func leftoverKeys(keys, uid string, own map[uint64]bool) string {
	for _, line := range strings.Split(keys, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[5] != uid {
			continue
		}
		serial, err := strconv.ParseUint(f[0], 16, 64)
		if err == nil && own[serial] {
			continue
		}
		return line
	}
	return ""
}

func killAll(uid, gid int) {
	if syscall.Setgroups([]int{}) != nil || syscall.Setresgid(gid, gid, gid) != nil || syscall.Setresuid(uid, uid, uid) != nil {
		os.Exit(1)
	}
	// One kill(-1) reaches every process of uid, and a fatally signalled process cannot finish
	// a fork; a few more rounds cost nothing.
	for range 5 {
		if err := syscall.Kill(-1, syscall.SIGKILL); err == syscall.ESRCH {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	os.Exit(0)
}

// closeExtraFDs marks every descriptor above stderr close-on-exec, so the program inherits only
// stdin, stdout and stderr (no handle into the host filesystem).
func closeExtraFDs() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		// No /proc: fall back to a fixed range.
		for fd := 3; fd < 1024; fd++ {
			syscall.CloseOnExec(fd)
		}
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// buildRoot assembles the private root on sp.Root and pivots into it. Runs in the new mount
// namespace, still as root.
func buildRoot(sp helperSpec) error {
	const (
		bind     = syscall.MS_BIND | syscall.MS_REC
		hardened = syscall.MS_NOSUID | syscall.MS_NODEV
	)
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := sp.Root
	if err := syscall.Mount("tmpfs", root, "tmpfs", hardened, "size=1m,mode=0755"); err != nil {
		return fmt.Errorf("mount root tmpfs on %s: %w", root, err)
	}
	inside := func(p string) string { return filepath.Join(root, p) }
	for _, p := range sp.ReadOnly {
		fi, err := os.Lstat(p)
		if err != nil {
			continue // optional (e.g. /lib64 on some systems)
		}
		if fi.Mode()&os.ModeSymlink != 0 { // /bin -> usr/bin on merged-/usr systems
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("readlink %s: %w", p, err)
			}
			if err := os.MkdirAll(filepath.Dir(inside(p)), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(target, inside(p)); err != nil && !os.IsExist(err) {
				return fmt.Errorf("symlink %s: %w", p, err)
			}
			continue
		}
		if err := mountPoint(inside(p), fi.IsDir()); err != nil {
			return err
		}
		if err := syscall.Mount(p, inside(p), "", bind, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
		if err := syscall.Mount("", inside(p), "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|hardened, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", p, err)
		}
	}
	for _, b := range sp.Binds {
		if err := mountPoint(inside(b.Dst), true); err != nil {
			return err
		}
		if b.TmpfsSize > 0 {
			opts := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", b.TmpfsSize, sp.UID, sp.GID)
			if err := syscall.Mount("tmpfs", inside(b.Dst), "tmpfs", hardened, opts); err != nil {
				return fmt.Errorf("mount tmpfs on %s: %w", b.Dst, err)
			}
			if err := copyFiles(b.Src, inside(b.Dst), sp.UID, sp.GID); err != nil {
				return err
			}
			continue
		}
		if err := syscall.Mount(b.Src, inside(b.Dst), "", bind, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.Src, err)
		}
		flags := uintptr(syscall.MS_BIND | syscall.MS_REMOUNT | hardened)
		if b.ReadOnly {
			flags |= syscall.MS_RDONLY
		}
		if err := syscall.Mount("", inside(b.Dst), "", flags, ""); err != nil {
			return fmt.Errorf("remount %s: %w", b.Dst, err)
		}
	}
	for _, d := range []string{"null", "zero", "random", "urandom"} {
		p := "/dev/" + d
		if err := mountPoint(inside(p), false); err != nil {
			return err
		}
		if err := syscall.Mount(p, inside(p), "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
		if err := syscall.Mount("", inside(p), "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_NOSUID|syscall.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("remount %s: %w", p, err)
		}
	}
	for link, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, inside("/dev/"+link)); err != nil {
			return fmt.Errorf("symlink /dev/%s: %w", link, err)
		}
	}
	if err := mountPoint(inside("/proc"), true); err != nil {
		return err
	}
	if err := syscall.Mount("proc", inside("/proc"), "proc", hardened|syscall.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	// /proc/keys lists the serials of every key the program may view, its own uid's and other
	// slots' alike: with a serial, a key another run made readable can be read (keyctl is denied by
	// the seccomp filter, but the keyrings must hold without it). Masked with /dev/null, as container
	// runtimes do; the serials themselves are random 31-bit numbers.
	for _, f := range []string{"/proc/keys", "/proc/key-users"} {
		if _, err := os.Stat(inside(f)); err != nil {
			continue // a kernel without keys
		}
		if err := syscall.Mount("/dev/null", inside(f), "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask %s: %w", f, err)
		}
	}
	old := inside("/.oldroot")
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := syscall.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root %s: %w", root, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return err
	}
	if err := syscall.Unmount("/.oldroot", syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return err
	}
	// Everything outside the writable binds is read-only from here on: /tmp does not exist and
	// cannot be created.
	if err := syscall.Mount("", "/", "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY|hardened, ""); err != nil {
		return fmt.Errorf("remount / read-only: %w", err)
	}
	return nil
}

// copyFiles copies the regular files at the top of src into dst, keeping their modes, owned by
// uid:gid.
func copyFiles(src, dst string, uid, gid int) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.OpenFile(filepath.Join(src, e.Name()), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("copy %s: %w", e.Name(), err)
		}
		fi, err := in.Stat()
		if err != nil {
			in.Close()
			return err
		}
		out, err := os.OpenFile(filepath.Join(dst, e.Name()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, fi.Mode().Perm())
		if err == nil {
			_, err = io.Copy(out, in)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		in.Close()
		if err == nil {
			err = os.Chown(filepath.Join(dst, e.Name()), uid, gid)
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", e.Name(), err)
		}
	}
	return nil
}

// mountPoint creates an empty directory or file to mount on.
func mountPoint(p string, dir bool) error {
	if dir {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", filepath.Dir(p), err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return f.Close()
}
