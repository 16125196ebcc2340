// Over 500 lines on purpose: spawn (start one helper, enforce its wall clock and output cap, collect the result) reads best in one piece beside the slot and work-dir code it uses.

package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	defaultUIDBase = 1600000
	insideWork     = "/work"
	insideGoCache  = "/gocache"
)

// Sandbox runs untrusted programs. It is safe for concurrent use; at most Config.Slots
// processes run at once.
type Sandbox struct {
	cfg    Config
	mode   Mode
	reason string // why a better mode was not available
	exe    string
	slots  chan int
	// filter is the seccomp program every sandboxed process gets (nil: no seccomp here);
	// netFilter the one of a run with a Loopback (IPv4 sockets allowed).
	filter, netFilter []sockFilter
	// cg makes the per-run cgroups (nil: none writable here; rlimits only).
	cg  *cgroups
	seq atomic.Uint64

	goOnce sync.Once
	goErr  error
	goVer  string // "1.26"

	// claim holds the default uid range (nil with an explicit uid_base); Close, or the process's
	// end, releases it.
	claim *os.File
}

// New prepares BaseDir and finds the best mode this machine allows by running a probe
// (/bin/true) through the full setup. It fails with ErrUnavailable when no mode works (for
// example when not running as root: switching uid needs it).
func New(cfg Config) (*Sandbox, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BaseDir != "" && !filepath.IsAbs(cfg.BaseDir) {
		return nil, fmt.Errorf("sandbox: config: base_dir=%q: want an absolute path", cfg.BaseDir)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("sandbox: new: euid %d: switching to an unprivileged uid needs root: %w", os.Geteuid(), ErrUnavailable)
	}
	var claim *os.File // the default uid range's lock, held by the Sandbox (uidrange_linux.go)
	ok := false
	defer func() {
		if !ok && claim != nil {
			_ = claim.Close()
		}
	}()
	baseDir := "temper-sandbox"
	if cfg.UIDBase == 0 {
		var k int
		var err error
		if claim, k, err = claimUIDRange(uidLockDir); err != nil {
			return nil, err
		}
		cfg.UIDBase = defaultUIDBase + k*uidRangeStride
		if k > 0 {
			// Its own default base directory: work directories and the Go build cache belong to
			// the range's uids (the cache to its builder, which alone writes it).
			baseDir += "-" + strconv.Itoa(k)
		}
	}
	if cfg.BaseDir == "" {
		cfg.BaseDir = filepath.Join(os.TempDir(), baseDir)
	}
	cfg.Slots = cmp.Or(cfg.Slots, 2)
	if cfg.GoCache == "" {
		cfg.GoCache = filepath.Join(cfg.BaseDir, "gocache")
	}
	if cfg.Python == "" {
		for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
			if _, err := os.Stat(p); err == nil {
				cfg.Python = p
				break
			}
		}
	}
	if cfg.GoRoot == "" {
		if p, err := exec.LookPath("go"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				cfg.GoRoot = filepath.Dir(filepath.Dir(real))
			}
		}
	}
	cfg.Limits = cfg.Limits.withDefaults(DefaultLimits())
	cfg.BuildLimits = cfg.BuildLimits.withDefaults(DefaultBuildLimits())
	if len(cfg.ReadOnly) == 0 {
		cfg.ReadOnly = []string{"/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc"}
	}
	if cfg.GoRoot != "" {
		cfg.ReadOnly = append(cfg.ReadOnly, cfg.GoRoot)
	}
	if cfg.Python != "" {
		if real, err := filepath.EvalSymlinks(cfg.Python); err == nil {
			cfg.ReadOnly = append(cfg.ReadOnly, filepath.Dir(filepath.Dir(real)))
		}
	}
	cfg.ReadOnly = outermost(cfg.ReadOnly)

	if err := os.MkdirAll(cfg.BaseDir, 0o711); err != nil {
		return nil, fmt.Errorf("sandbox: new: mkdir %s: %w", cfg.BaseDir, err)
	}
	if err := os.Chmod(cfg.BaseDir, 0o711); err != nil {
		return nil, fmt.Errorf("sandbox: new: chmod %s: %w", cfg.BaseDir, err)
	}
	if err := os.MkdirAll(filepath.Join(cfg.BaseDir, "root"), 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: new: %w", err)
	}
	stale, _ := filepath.Glob(filepath.Join(cfg.BaseDir, "run-*"))
	for _, d := range stale {
		if ownRunDir(filepath.Base(d), cfg.UIDBase, cfg.UIDBase+cfg.Slots) {
			_ = os.RemoveAll(d)
		}
	}
	s := &Sandbox{cfg: cfg, exe: "/proc/self/exe", slots: make(chan int, cfg.Slots), claim: claim}
	for i := range cfg.Slots {
		s.slots <- i
	}
	// Missing protections are named in ModeReason, after the mode.
	var missing []string
	if seccompSupported() {
		f, err := buildFilter(false)
		if err != nil {
			return nil, fmt.Errorf("sandbox: new: %w", err)
		}
		nf, err := buildFilter(true)
		if err != nil {
			return nil, fmt.Errorf("sandbox: new: %w", err)
		}
		s.filter, s.netFilter = f, nf
	} else {
		missing = append(missing, "no seccomp in this kernel: syscalls are not filtered")
	}
	if cg, err := probeCgroups(); err == nil {
		cg.sweep()
		s.cg = cg
	} else {
		missing = append(missing, fmt.Sprintf("no writable cgroup (%v): memory, processes and CPU time are bounded per process by rlimits only, shared memory not at all", err))
	}
	var reasons []string
	for _, m := range []Mode{ModeIsolated, ModeRestricted} {
		if cfg.Mode != "" && cfg.Mode != m {
			continue
		}
		if m == ModeRestricted {
			if err := traversable(cfg.BaseDir); err != nil {
				reasons = append(reasons, fmt.Sprintf("%s: %v", m, err))
				continue
			}
		}
		s.mode = m
		err := s.probe()
		if err == nil {
			s.reason = strings.Join(append(reasons, missing...), "; ")
			ok = true
			return s, nil
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", m, err))
	}
	return nil, fmt.Errorf("sandbox: new: %s: %w", strings.Join(reasons, "; "), ErrUnavailable)
}

// Close releases the sandbox's default uid range for another sandbox to claim; the process's end
// releases it too. Runs must be over: a sandbox is not used after Close.
func (s *Sandbox) Close() error {
	if s.claim == nil {
		return nil
	}
	err := s.claim.Close()
	s.claim = nil
	return err
}

// Mode reports the isolation achieved.
func (s *Sandbox) Mode() Mode { return s.mode }

// ModeReason says why better modes were not available and which protections of the mode are
// missing on this machine (no seccomp, no writable cgroup); "" when everything is in force.
func (s *Sandbox) ModeReason() string { return s.reason }

// Config returns the configuration with defaults filled in.
func (s *Sandbox) Config() Config { return s.cfg }

func (s *Sandbox) probe() error {
	t := "/bin/true"
	if _, err := os.Stat("/usr/bin/true"); err == nil {
		t = "/usr/bin/true"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := s.Run(ctx, Command{Path: t, Limits: Limits{Timeout: 10 * time.Second}})
	if err != nil {
		return err
	}
	if f := r.Failure(); f != "" {
		return fmt.Errorf("probe %s: %s: %s", t, f, bytes.TrimSpace(r.Stderr))
	}
	return nil
}

// outermost drops paths nested in other listed paths, and duplicates.
func outermost(paths []string) []string {
	var out []string
	for i, p := range paths {
		p = filepath.Clean(p)
		nested := false
		for j, q := range paths {
			q = filepath.Clean(q)
			if i != j && (strings.HasPrefix(p, q+"/") || (p == q && j < i)) {
				nested = true
				break
			}
		}
		if !nested {
			out = append(out, p)
		}
	}
	return out
}

// traversable checks that other users may walk down to dir (restricted mode runs on host paths).
func traversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by other users (mode %v)", d, fi.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// job is one sandboxed process, as the helper will set it up.
type job struct {
	uid     int
	workDir string      // host directory, the cwd
	binds   []bindMount // extra writable binds (isolated mode)
	path    string
	args    []string
	env     []string
	stdin   []byte
	limits  Limits
	// memory bounds the run's cgroup (the whole tree, shared memory included); cpu is the CPU
	// time of the whole tree (0: RLIMIT_CPU per process only).
	memory int64
	cpu    time.Duration
	// Of an agent's run (Command): its network, read-only mounts, working directory (inside)
	// and RLIMIT_AS when above limits.Memory.
	net          *Loopback
	mounts       []Mount
	dir          string
	addressSpace int64
}

func (s *Sandbox) acquire(ctx context.Context) (int, error) {
	select {
	case slot := <-s.slots:
		return slot, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("sandbox: wait for a slot: %w", ctx.Err())
	}
}

func (s *Sandbox) release(slot int) { s.slots <- slot }

func (s *Sandbox) slotUID(slot int) int { return s.cfg.UIDBase + 1 + slot }

// newWorkDir makes a private work directory owned by uid.
func (s *Sandbox) newWorkDir(uid int) (string, error) {
	dir := filepath.Join(s.cfg.BaseDir, fmt.Sprintf("run-%d-%d", uid, s.seq.Add(1)))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("sandbox: mkdir %s: %w", dir, err)
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("sandbox: chown %s: %w", dir, err)
	}
	return dir, nil
}

// writeFile writes a file owned by uid into dir; name must be a plain file name.
func writeFile(dir, name string, data []byte, mode os.FileMode, uid int) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return fmt.Errorf("sandbox: file name %q: want a plain file name", name)
	}
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return fmt.Errorf("sandbox: write %s: %w", p, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chown(p, uid, uid)
	}
	if err == nil {
		err = os.Chmod(p, mode)
	}
	if err != nil {
		return fmt.Errorf("sandbox: write %s: %w", p, err)
	}
	return nil
}

// Run executes one command in a fresh sandbox with a fresh work directory, which is removed
// afterwards. The error is for failures of the sandbox itself (setup, exec of a missing
// interpreter); whatever the program does is in the Result.
func (s *Sandbox) Run(ctx context.Context, c Command) (Result, error) {
	if err := c.Limits.Validate(); err != nil {
		return Result{}, err
	}
	if (c.Net != nil || len(c.Mounts) > 0) && s.mode != ModeIsolated {
		return Result{}, fmt.Errorf("sandbox: run %s: a loopback network and read-only mounts need the isolated mode; this machine has %s (%s)", c.Path, s.mode, s.reason)
	}
	for _, m := range c.Mounts {
		if err := m.check(); err != nil {
			return Result{}, err
		}
	}
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		return Result{}, fmt.Errorf("sandbox: run %s: dir %q: want an absolute path inside", c.Path, c.Dir)
	}
	if c.AddressSpace < 0 {
		return Result{}, fmt.Errorf("sandbox: run %s: address space %d: want >= 0", c.Path, c.AddressSpace)
	}
	slot, err := s.acquire(ctx)
	if err != nil {
		return Result{}, err
	}
	defer s.release(slot)
	uid := s.slotUID(slot)
	dir, err := s.newWorkDir(uid)
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	for name, data := range c.Files {
		mode := os.FileMode(0o644)
		if contains(c.Exec, name) {
			mode = 0o755
		}
		if err := writeFile(dir, name, data, mode, uid); err != nil {
			return Result{}, err
		}
	}
	lim := c.Limits.withDefaults(s.cfg.Limits)
	mem := c.treeMemory
	mem = cmp.Or(mem, lim.Memory+lim.Disk)
	return s.spawn(ctx, job{uid: uid, workDir: dir, path: c.Path, args: c.Args, env: c.Env, stdin: c.Stdin,
		limits: lim, memory: mem, cpu: lim.CPUTime, net: c.Net, mounts: c.Mounts, dir: c.Dir, addressSpace: c.AddressSpace})
}

// check names a bad mount: both paths absolute, Dst not the root nor a place the sandbox builds
// itself (/proc, /dev, the work directory).
func (m Mount) check() error {
	if !filepath.IsAbs(m.Src) || !filepath.IsAbs(m.Dst) {
		return fmt.Errorf("sandbox: mount %s at %s: want absolute paths", m.Src, m.Dst)
	}
	d := filepath.Clean(m.Dst)
	for _, own := range []string{"/", "/proc", "/dev", insideWork} {
		if d == own || (own != "/" && strings.HasPrefix(d, own+"/")) {
			return fmt.Errorf("sandbox: mount %s at %s: the sandbox owns %s; pick another place", m.Src, m.Dst, own)
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// spawn starts the helper for j, enforces the wall clock and the output cap, and collects the
// result. The caller holds a slot for j.uid.
func (s *Sandbox) spawn(ctx context.Context, j job) (Result, error) {
	isolated := s.mode == ModeIsolated
	dir := j.workDir
	if isolated {
		dir = insideWork
	}
	env := mergeEnv([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8"}, j.env)
	if j.dir != "" {
		dir = j.dir
	}
	as := uint64(max(j.limits.Memory, j.addressSpace))
	cpu := uint64((j.limits.CPUTime + time.Second - 1) / time.Second)
	// With a cgroup, pids.max is the limit the tree meets first (so the verdict can name it);
	// RLIMIT_NPROC stays as a backstop a little above it.
	nproc := uint64(j.limits.Procs)
	if s.cg != nil {
		nproc += 2
	}
	sp := helperSpec{
		Isolated: isolated,
		Dir:      dir,
		UID:      j.uid,
		GID:      j.uid,
		Path:     j.path,
		Argv:     append([]string{j.path}, j.args...),
		Env:      env,
		Rlimits: []rlimit{
			{rlimitCPU, cpu, cpu + 1},
			{rlimitAS, as, as},
			{rlimitNPROC, nproc, nproc},
			{rlimitFSIZE, uint64(j.limits.FileSize), uint64(j.limits.FileSize)},
			{rlimitNOFILE, uint64(j.limits.OpenFiles), uint64(j.limits.OpenFiles)},
			{rlimitCORE, 0, 0},
		},
	}
	if isolated {
		sp.Root = filepath.Join(s.cfg.BaseDir, "root")
		sp.ReadOnly = s.cfg.ReadOnly
		// Runs get a private tmpfs; builds (Disk 0) a bind, since the binary must come back.
		sp.Binds = append([]bindMount{{Src: j.workDir, Dst: insideWork, TmpfsSize: j.limits.Disk}}, j.binds...)
		for _, m := range j.mounts {
			sp.Binds = append(sp.Binds, bindMount{Src: m.Src, Dst: m.Dst, ReadOnly: true})
		}
	}
	sp.Filter = s.filter
	if j.net != nil {
		sp.Filter, sp.NetNS = s.netFilter, true
	}
	var rc *runCgroup
	if s.cg != nil {
		var err error
		rc, err = s.cg.create(fmt.Sprintf("run-%d-%d", os.Getpid(), s.seq.Add(1)), j.memory, j.limits.Procs)
		if err != nil {
			return Result{}, fmt.Errorf("sandbox: %w", err)
		}
		defer rc.remove()
		sp.Cgroups = rc.procsFiles()
	}
	raw, err := json.Marshal(sp)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: encode spec: %w", err)
	}

	var files []*os.File // every pipe end, closed on return
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}

	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	extra := []*os.File{statusW}
	if isolated {
		attr.Cloneflags = syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS
		if j.net != nil { // the helper joins the loopback's namespace (netNSFD) instead
			attr.Cloneflags &^= syscall.CLONE_NEWNET
			extra = append(extra, j.net.ns)
		}
	}
	cmd := &exec.Cmd{
		Path:        s.exe,
		Args:        []string{"temper-sandbox"},
		Env:         []string{helperEnv + "=" + string(raw)},
		Dir:         "/",
		Stdin:       stdinR,
		Stdout:      stdoutW,
		Stderr:      stderrW,
		ExtraFiles:  extra,
		SysProcAttr: attr,
	}
	start := time.Now()
	if err := startOnForker(cmd); err != nil {
		return Result{}, fmt.Errorf("sandbox: start helper (%s mode): %w", s.mode, err)
	}
	// The child holds its ends now.
	for _, f := range []*os.File{statusW, stdinR, stdoutW, stderrW} {
		_ = f.Close()
	}
	proc := cmd.Process
	kill := func() {
		// os.Process signals through a pidfd: never a recycled pid. In isolated mode this is the
		// namespace's init, and the kernel takes every descendant along.
		_ = proc.Kill()
		if rc != nil {
			rc.kill()
		}
		if !isolated {
			s.killAll(j.uid)
		}
	}
	var timedOut, cpuOver atomic.Bool
	timer := time.AfterFunc(j.limits.Timeout, func() { timedOut.Store(true); kill() })
	defer timer.Stop()
	// RLIMIT_CPU is per process: a chain of children each under it adds up. The cgroup's usage
	// is the whole tree's, polled.
	stopWatch := make(chan struct{})
	if rc != nil && j.cpu > 0 {
		go func() {
			tick := time.NewTicker(min(max(j.cpu/20, 10*time.Millisecond), 100*time.Millisecond))
			defer tick.Stop()
			for {
				select {
				case <-stopWatch:
					return
				case <-tick.C:
					if u, err := rc.cpuUsage(); err == nil && u > j.cpu {
						cpuOver.Store(true)
						kill()
						return
					}
				}
			}
		}()
	}
	stopCtx := context.AfterFunc(ctx, kill)
	defer stopCtx()

	go func() { // a program that never reads stdin leaves this blocked until it dies (EPIPE)
		_, _ = stdinW.Write(j.stdin)
		_ = stdinW.Close()
	}()
	var stdout, stderr bytes.Buffer
	var exceeded atomic.Bool
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		if capped(stdoutR, &stdout, j.limits.Output) {
			exceeded.Store(true)
			kill()
		}
	}()
	go func() {
		defer readers.Done()
		capped(stderrR, &stderr, stderrCap)
		_, _ = io.Copy(io.Discard, stderrR) // keep draining so the program never blocks on it
	}()

	status, _ := io.ReadAll(io.LimitReader(statusR, 4096))
	waitErr := cmd.Wait()
	elapsed := time.Since(start)
	timer.Stop()
	stopCtx()
	close(stopWatch)
	if !isolated {
		s.killAll(j.uid) // descendants that left the process group
		sweepShared(j.uid)
	}
	// Every writer is dead now (the namespace is gone, or the uid was swept); give the readers
	// a moment to drain, then cut the pipes.
	done := make(chan struct{})
	go func() { readers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		_ = stdoutR.Close()
		_ = stderrR.Close()
		<-done
	}
	if len(status) > 0 {
		return Result{}, fmt.Errorf("sandbox: setup (%s mode): %s", s.mode, status)
	}
	if err := ctx.Err(); err != nil && !timedOut.Load() {
		return Result{}, fmt.Errorf("sandbox: run %s: %w", j.path, err)
	}
	res := Result{
		Stdout:         stdout.Bytes(),
		Stderr:         stderr.Bytes(),
		OutputExceeded: exceeded.Load(),
		TimedOut:       timedOut.Load(),
		Elapsed:        elapsed,
		Mode:           s.mode,
	}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			res.ExitCode = -1
			res.Signal = ws.Signal().String()
		} else {
			res.ExitCode = ws.ExitStatus()
		}
	default:
		return Result{}, fmt.Errorf("sandbox: wait %s: %w", j.path, waitErr)
	}
	switch {
	case cpuOver.Load():
		res.Limit = LimitCPU
	case rc != nil && j.cpu > 0 && cpuOverAfter(rc, j.cpu):
		res.Limit = LimitCPU
	case res.Signal == syscall.SIGXCPU.String():
		res.Limit = LimitCPU
	case res.Failure() == "":
	case rc != nil && rc.memoryHit():
		res.Limit = LimitMemory
	case rc != nil && rc.pidsHit():
		res.Limit = LimitProcs
	}
	return res, nil
}

// cpuOverAfter checks the tree's CPU time once the run is over (it may have ended between polls).
func cpuOverAfter(rc *runCgroup, limit time.Duration) bool {
	u, err := rc.cpuUsage()
	return err == nil && u > limit
}

// forker starts every helper from one OS thread that is locked and never exits. The parent-death
// signal of a child fires when the thread that forked it exits, not the process: forking from
// an ordinary Go thread could kill a healthy sandbox whenever the runtime retires that thread.
var forker struct {
	once sync.Once
	reqs chan forkRequest
}

type forkRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func startOnForker(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.reqs = make(chan forkRequest)
		go func() {
			runtime.LockOSThread() // never unlocked: this thread lives as long as the process
			for r := range forker.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.reqs <- forkRequest{cmd, done}
	return <-done
}

// mergeEnv returns base with the variables of over replacing those of the same name, once each
// (C's getenv takes the first of duplicates, Go's the last).
func mergeEnv(base, over []string) []string {
	idx := map[string]int{}
	var out []string
	for _, kv := range append(append([]string{}, base...), over...) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// capped copies r into buf up to limit bytes and reports whether more was written.
func capped(r io.Reader, buf *bytes.Buffer, limit int) bool {
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			room := limit - buf.Len()
			if n > room {
				buf.Write(chunk[:max(room, 0)])
				return true
			}
			buf.Write(chunk[:n])
		}
		if err != nil {
			return false
		}
	}
}

// sharedDirs are the usual world-writable places of the host a restricted run can leave files
// in; /dev/shm and /dev/mqueue hold host memory.
var sharedDirs = []string{"/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/lock"}

// sweepShared removes what uid left at the top of the shared directories (restricted mode, after
// the uid's processes are gone): files there would hold host memory or disk after the run and
// could feed later runs. RemoveAll does not follow symlinks.
func sweepShared(uid int) {
	for _, d := range sharedDirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				continue
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
				_ = os.RemoveAll(filepath.Join(d, e.Name()))
			}
		}
	}
}

// killAll kills every process of uid (restricted mode: programs can leave their process group
// with setsid, but not their uid). A helper switches to uid and calls kill(-1, SIGKILL), which
// reaches exactly the processes that uid may signal: its own. Unlike a /proc scan it cannot
// hit a recycled pid.
func (s *Sandbox) killAll(uid int) {
	raw, _ := json.Marshal(helperSpec{KillAll: true, UID: uid, GID: uid, Dir: "/"})
	cmd := &exec.Cmd{Path: s.exe, Args: []string{"temper-sandbox-kill"}, Env: []string{helperEnv + "=" + string(raw)}, Dir: "/"}
	_ = cmd.Run()
}
