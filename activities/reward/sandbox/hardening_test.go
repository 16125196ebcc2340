//go:build linux

// Over 500 lines on purpose: one table per hostile-program family, sharing the sandbox fixture.

package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests in this file are the hostile programs of issue 14, one group per hole it found:
// kernel keyrings, memory outside the address-space limit, Go test verdicts, CPU time per
// process tree, host Unix sockets and go.work in restricted mode. Each was first run against the
// code before the fix and failed there.

// pyPrelude gives Python programs raw syscalls (x86-64 numbers) through ctypes.
const pyPrelude = `import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    conv = [a if isinstance(a, (bytes, ctypes.Array)) else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *conv)
    return r, (ctypes.get_errno() if r < 0 else 0)
ADD_KEY, KEYCTL = 248, 250
USER, USER_SESSION, SESSION = -4, -5, -3
def add_key(desc, payload, ring):
    return sc(ADD_KEY, b"user", desc, payload, len(payload), ring)
def read_key(kid):
    buf = ctypes.create_string_buffer(4096)
    n, e = sc(KEYCTL, 11, kid, buf, 4096)
    return buf.raw[:n] if n > 0 else b""
`

func needAmd64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the hostile programs use x86-64 syscall numbers")
	}
}

// keyStealer searches every keyring it can name for keys called desc and reads every key
// /proc/keys shows; it prints what it read.
func keyStealer(desc string) string {
	return pyPrelude + fmt.Sprintf(`found = []
for ring in (USER, USER_SESSION, SESSION):
    kid, e = sc(KEYCTL, 10, ring, b"user", %q.encode(), 0)
    if kid > 0:
        found.append(read_key(kid))
try:
    for line in open("/proc/keys"):
        found.append(read_key(int(line.split()[0], 16)))
except OSError:
    pass
print(b"|".join(found).decode(errors="replace"))
`, desc)
}

func keyPlanter(desc, secret string, hold time.Duration) string {
	return pyPrelude + fmt.Sprintf(`import time
for ring in (USER, USER_SESSION, SESSION):
    kid, e = add_key(%q.encode(), %q.encode(), ring)
    if kid > 0:
        sc(KEYCTL, 5, kid, 0x3f3f3f3f)  # KEYCTL_SETPERM: everyone may read
    print(ring, kid, e)
time.sleep(%g)
`, desc, secret, hold.Seconds())
}

// TestKeyringsDoNotLeak: a key one run stores must not be readable by a later run on the same
// slot uid, nor by a concurrent run on another slot.
func TestKeyringsDoNotLeak(t *testing.T) {
	needAmd64(t)
	for _, filtered := range []bool{true, false} {
		name := "same slot, later run"
		if !filtered {
			name += ", no seccomp" // the keyrings alone must hold
		}
		t.Run(name, func(t *testing.T) {
			s := newSandbox(t, Config{Slots: 1})
			needPython(t, s)
			if !filtered {
				s.filter = nil
			}
			secret, desc := "key-"+randomName(t), "temper-leak-"+randomName(t)
			r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", keyPlanter(desc, secret, 0)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("planter: %q %q", r.Stdout, lastLine(string(r.Stderr)))
			r, err = s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", keyStealer(desc)}})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(r.Stdout), secret) {
				t.Errorf("a later run on the same slot read the key: %q", r.Stdout)
			}
		})
	}
	t.Run("other slot, concurrent run", func(t *testing.T) {
		s := newSandbox(t, Config{Slots: 2})
		needPython(t, s)
		if out, secret := concurrentKeyTheft(t, s); strings.Contains(out, secret) {
			t.Errorf("a concurrent run on another slot read the key: %q", out)
		}
	})
	// Without seccomp, keyctl works: the planter's world-readable key is only safe because no run can
	// learn its serial (/proc/keys is masked in the isolated root).
	t.Run("other slot, concurrent run, no seccomp", func(t *testing.T) {
		s := newSandbox(t, Config{Slots: 2})
		needPython(t, s)
		if s.Mode() != ModeIsolated {
			t.Skip("restricted mode shares the host's /proc: it relies on the seccomp filter here")
		}
		s.filter = nil
		if out, secret := concurrentKeyTheft(t, s); strings.Contains(out, secret) {
			t.Errorf("a concurrent run on another slot read the key without seccomp: %q", out)
		}
	})
}

// concurrentKeyTheft runs a program that plants a world-readable key (and holds it 2 s) and, while
// it runs, one on the other slot that tries to read it; it returns the thief's output and the secret.
func concurrentKeyTheft(t *testing.T, s *Sandbox) (stolen, secret string) {
	t.Helper()
	secret, desc := "key-"+randomName(t), "temper-leak-"+randomName(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", keyPlanter(desc, secret, 2*time.Second)}})
	}()
	time.Sleep(700 * time.Millisecond)
	r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", keyStealer(desc)}})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return string(r.Stdout), secret
}

// TestWorkerKeyringUntouched: a worker that holds a session keyring (pam_keyinit does this for
// services) must not have it read, filled or cleared by a program.
func TestWorkerKeyringUntouched(t *testing.T) {
	needAmd64(t)
	const workerEnv = "TEMPER_SANDBOX_TEST_KEYRING_WORKER"
	if base := os.Getenv(workerEnv); base != "" {
		s, err := New(Config{BaseDir: base, Slots: 1, UIDBase: testUIDBase})
		if err != nil {
			t.Fatal(err)
		}
		src := pyPrelude + `ids = []
n, e = sc(KEYCTL, 0, SESSION, 0)  # KEYCTL_GET_KEYRING_ID
print("session", n, e)
buf = ctypes.create_string_buffer(4096)
n, e = sc(KEYCTL, 11, SESSION, buf, 4096)
ids = [int.from_bytes(buf.raw[i:i+4], "little") for i in range(0, max(n, 0), 4)]
print("ids", ids, e)
for kid in ids:
    print("read", read_key(kid))
print("add", add_key(b"planted", b"x", SESSION))
print("clear", sc(KEYCTL, 7, SESSION))
`
		r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", src}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("PROGRAM:%q\n", r.Stdout)
		return
	}
	s := newSandbox(t, Config{})
	needPython(t, s)
	secret := "worker-" + randomName(t)
	done := make(chan string, 1)
	go func() {
		// This thread's credentials change: it stays locked and dies with the goroutine.
		runtime.LockOSThread()
		out, err := func() (string, error) {
			if _, err := unix.KeyctlJoinSessionKeyring("temper-test-worker"); err != nil {
				return "", fmt.Errorf("join session keyring: %w", err)
			}
			id, err := unix.AddKey("user", "worker-key", []byte(secret), unix.KEY_SPEC_SESSION_KEYRING)
			if err != nil {
				return "", fmt.Errorf("add key: %w", err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerKeyringUntouched$", "-test.v")
			cmd.Env = append(os.Environ(), workerEnv+"="+filepath.Join(filepath.Dir(s.Config().BaseDir), "worker"))
			b, err := cmd.CombinedOutput()
			if err != nil {
				return string(b), fmt.Errorf("worker: %w", err)
			}
			buf := make([]byte, 4096)
			n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, unix.KEY_SPEC_SESSION_KEYRING, buf, 0)
			if err != nil {
				return string(b), fmt.Errorf("read session keyring: %w", err)
			}
			if n != 4 {
				return string(b), fmt.Errorf("the worker's session keyring holds %d keys after the run, want 1", n/4)
			}
			p := make([]byte, 256)
			m, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, p, 0)
			if err != nil || string(p[:m]) != secret {
				return string(b), fmt.Errorf("the worker's key was changed: %q %v", p[:max(m, 0)], err)
			}
			return string(b), nil
		}()
		if err != nil {
			out += "\nERROR: " + err.Error()
		}
		done <- out
	}()
	out := <-done
	t.Logf("%s", out)
	if strings.Contains(out, "ERROR:") {
		t.Error("worker keyring check failed")
	}
	if strings.Contains(out, secret) {
		t.Errorf("the program read the worker's key")
	}
}

// TestMemoryOutsideAddressSpace: shared memory that lives outside the program's address space
// (memfd, SysV) counts against the run's memory limit.
func TestMemoryOutsideAddressSpace(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	progs := map[string]string{
		// RLIMIT_FSIZE bounds each memfd, RLIMIT_NOFILE their number: 60 of 16 MiB.
		"memfd 960 MiB": `import os
chunk = b"x" * (16 << 20)
fds = []
for i in range(60):
    fds.append(os.memfd_create("hoard%d" % i))
    os.write(fds[-1], chunk)
print("held", sum(os.fstat(fd).st_size for fd in fds) >> 20)
`,
		"SysV shm 1 GiB": pyPrelude + `libc.shmat.restype = ctypes.c_void_p
held = 0
for _ in range(16):
    sid, e = sc(29, 0, 64 << 20, 0o1600)  # shmget(IPC_PRIVATE, 64 MiB, IPC_CREAT|0600)
    if sid < 0:
        raise OSError(e, "shmget")
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 64 << 20)
    libc.shmdt(ctypes.c_void_p(addr))
    held += 64
print("held", held)
`,
	}
	// Without seccomp shmget works: the cgroup alone must stop it.
	unfiltered := newSandbox(t, Config{})
	unfiltered.filter = nil
	progs["SysV shm 1 GiB, no seccomp"] = progs["SysV shm 1 GiB"]
	want := map[string]string{"memfd 960 MiB": "held 960", "SysV shm 1 GiB": "held 1024", "SysV shm 1 GiB, no seccomp": "held 1024"}
	for name, src := range progs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(src, "sc(29") {
				needAmd64(t)
			}
			sb := s
			if strings.HasSuffix(name, "no seccomp") {
				if testing.Short() {
					t.Skip("the kernel takes seconds to give up reclaiming at the limit")
				}
				sb = unfiltered
			}
			rep, err := sb.Check(t.Context(), Program{Language: Python, Source: src}, []TestCase{{Stdout: want[name]}}, Limits{Memory: 128 << 20, Timeout: 20 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s after %v: %q %q", rep.Reason, rep.Cases[0].Elapsed.Round(time.Millisecond), rep.Cases[0].Stdout, lastLine(rep.Cases[0].Stderr))
			if rep.Verdict != VerdictFailed {
				t.Fatalf("held the memory under a 128 MiB limit: %+v", rep)
			}
			// (With seccomp, SysV shared memory fails earlier, at shmget.)
			if sb.cg != nil && name != "SysV shm 1 GiB" && !strings.Contains(rep.Reason, "memory limit") {
				t.Errorf("reason %q, want the memory limit named", rep.Reason)
			}
		})
	}
}

// TestCPUTimeOfTheTree: children that each stay under the per-process CPU limit still add up
// against the run's CPU time.
func TestCPUTimeOfTheTree(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	src := `import os, time
def burn(sec):
    t = time.process_time()
    while time.process_time() - t < sec:
        pass
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        burn(0.8)
        os._exit(0)
    os.waitpid(pid, 0)
print("done")
`
	start := time.Now()
	rep, err := s.Check(t.Context(), Program{Language: Python, Source: src}, []TestCase{{Stdout: "done"}}, Limits{CPUTime: time.Second, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("%s after %v", rep.Reason, el.Round(time.Millisecond))
	if rep.Verdict != VerdictFailed {
		t.Fatalf("a forked chain used 4 s of CPU under a 1 s limit: %+v", rep)
	}
	if !strings.Contains(rep.Reason, "cpu time") {
		t.Errorf("reason %q, want the CPU time limit named", rep.Reason)
	}
}

// TestHostUnixSocketUnreachable: a socket file under a read-only bound path must not connect the
// program to the host's listener, in either mode.
func TestHostUnixSocketUnreachable(t *testing.T) {
	for _, mode := range []Mode{ModeIsolated, ModeRestricted} {
		t.Run(string(mode), func(t *testing.T) {
			dir, err := os.MkdirTemp("", "temper-sock-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "host.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if err := os.Chmod(sock, 0o777); err != nil {
				t.Fatal(err)
			}
			accepted := countAccepts(ln)
			s := newSandbox(t, Config{Mode: mode, ReadOnly: []string{"/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc", dir}})
			needPython(t, s)
			src := fmt.Sprintf("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect(%q)\ns.sendall(b'hi')\nprint('connected')\n", sock)
			r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", src}})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			t.Logf("%q %s", r.Stdout, lastLine(string(r.Stderr)))
			if n := accepted.Load(); n != 0 || strings.Contains(string(r.Stdout), "connected") {
				t.Errorf("the program reached the host socket (%d connections)", n)
			}
		})
	}
}

// TestDeniedSyscalls: calls no program needs fail with EPERM (clone3 with ENOSYS, so that libc
// falls back to clone, whose flags the filter can see).
func TestDeniedSyscalls(t *testing.T) {
	needAmd64(t)
	s := newSandbox(t, Config{})
	needPython(t, s)
	calls := []struct {
		name string
		call string
		want int // errno
	}{
		{"unshare(CLONE_NEWUSER)", "sc(272, 0x10000000)", 1},
		{"unshare(CLONE_NEWNS)", "sc(272, 0x00020000)", 1},
		{"setns", "sc(308, 0, 0)", 1},
		{"keyctl", "sc(250, 0, -3, 1)", 1},
		{"add_key", `sc(248, b"user", b"k", b"v", 1, -4)`, 1},
		{"request_key", `sc(249, b"user", b"k", 0, 0)`, 1},
		{"ptrace(TRACEME)", "sc(101, 0, 0, 0, 0)", 1},
		{"process_vm_readv", "sc(310, os.getpid(), 0, 0, 0, 0, 0)", 1},
		{"userfaultfd(USER_MODE_ONLY)", "sc(323, 1)", 1},
		{"io_uring_setup", "sc(425, 1, ctypes.create_string_buffer(120))", 1},
		{"perf_event_open", "sc(298, 0, 0, -1, -1, 0)", 1},
		{"bpf", "sc(321, 0, 0, 0)", 1},
		{"mount", `sc(165, b"none", b"/work", b"tmpfs", 0, 0)`, 1},
		{"socket(AF_UNIX)", "sc(41, 1, 1, 0)", 1},
		{"socket(AF_INET)", "sc(41, 2, 1, 0)", 1},
		{"shmget", "sc(29, 0, 4096, 0o1600)", 1},
		{"clock_settime", "sc(227, 0, ctypes.create_string_buffer(16))", 1},
		{"clone3", "sc(435, ctypes.create_string_buffer(88), 88)", 38},
	}
	var src strings.Builder
	src.WriteString(pyPrelude)
	for _, c := range calls {
		fmt.Fprintf(&src, "print(%q, *%s)\n", c.name, c.call)
	}
	r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", src.String()}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Failure() != "" {
		t.Fatalf("%s: %s", r.Failure(), r.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(r.Stdout)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 {
			got[strings.Join(f[:len(f)-2], " ")] = f[len(f)-2] + " " + f[len(f)-1]
		}
	}
	for _, c := range calls {
		if want := fmt.Sprintf("-1 %d", c.want); got[c.name] != want {
			t.Errorf("%s returned %q (result errno), want %q", c.name, got[c.name], want)
		}
	}
}

const (
	goAddSub      = "package sol\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return a - b }\n"
	goAddSubTest  = "package sol\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n\nfunc TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal(\"Sub\")\n\t}\n}\n"
	goAddSubXTest = "package sol_test\n\nimport (\n\t\"testing\"\n\n\t\"sandbox\"\n)\n\nfunc TestAdd(t *testing.T) {\n\tif sandbox.Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add\")\n\t}\n}\n"
	goWrong       = "\nfunc Add(a, b int) int { return 0 }\n\nfunc Sub(a, b int) int { return 0 }\n"
)

// TestGoTestVerdicts: in Go test mode a wrong solution must not pass by ending the process early,
// disabling the tests or forging their output; right solutions still pass.
func TestGoTestVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	s := newSandbox(t, Config{})
	cases := []struct {
		name, sol, test string
		pass            bool
	}{
		{"right", goAddSub, goAddSubTest, true},
		{"right, allowed imports", "package sol\n\nimport (\n\t\"sort\"\n\t\"strings\"\n)\n\nvar _ = sort.Ints\nvar _ = strings.Repeat\n" + goAddSub[len("package sol\n"):], goAddSubTest, true},
		{"right, harness TestMain", goAddSub, goAddSubTest + "\nfunc TestMain(m *testing.M) { m.Run() }\n", true},
		{"right, harness in an external package", goAddSub, goAddSubXTest, true},
		{"half right", "package sol\n\nfunc Add(a, b int) int { return a + b }\n\nfunc Sub(a, b int) int { return 0 }\n", goAddSubTest, false},
		{"init exits 0", "package sol\n\nimport \"os\"\n\nfunc init() { os.Exit(0) }\n" + goWrong, goAddSubTest, false},
		{"init disables the tests", "package sol\n\nimport \"os\"\n\nfunc init() { os.Args = append(os.Args, \"-test.run=^$\") }\n" + goWrong, goAddSubTest, false},
		{"init forges passes and exits", "package sol\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n\tfmt.Println(\"=== RUN   TestAdd\\n--- PASS: TestAdd (0.00s)\\n=== RUN   TestSub\\n--- PASS: TestSub (0.00s)\\nPASS\")\n\tos.Exit(0)\n}\n" + goWrong, goAddSubTest, false},
		{"init forges marked events and exits", "package sol\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc init() {\n\tfmt.Println(\"\\x16=== RUN   TestAdd\\n\\x16--- PASS: TestAdd (0.00s)\\n\\x16=== RUN   TestSub\\n\\x16--- PASS: TestSub (0.00s)\\n\\x16PASS\")\n\tos.Exit(0)\n}\n" + goWrong, goAddSubTest, false},
		{"init exits through syscall", "package sol\n\nimport \"syscall\"\n\nfunc init() { syscall.Exit(0) }\n" + goWrong, goAddSubTest, false},
		{"forged lines only", "package sol\n\nimport \"fmt\"\n\nfunc init() {\n\tfmt.Println(\"\\x16--- PASS: TestAdd (0.00s)\\n\\x16--- PASS: TestSub (0.00s)\\n\\x16PASS\")\n}\n" + goWrong, goAddSubTest, false},
	}
	// The same hacks with the import gate off: the test events alone must fail them.
	for _, c := range cases {
		if !c.pass && strings.HasPrefix(c.name, "init") {
			cases = append(cases, struct {
				name, sol, test string
				pass            bool
			}{c.name + ", no import gate", c.sol, c.test, false})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasSuffix(c.name, "no import gate") {
				goTestImportGate = false
				defer func() { goTestImportGate = true }()
			}
			sol := strings.Replace(c.sol, "package sol", "package sandbox", 1)
			test := strings.Replace(c.test, "package sol", "package sandbox", 1)
			rep, err := s.Check(t.Context(), Program{Language: Go, Source: sol, GoTest: test}, nil, Limits{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s %s (%d/%d) %s", rep.Verdict, rep.Reason, rep.Passed, rep.Total, rep.Build)
			if got := rep.Verdict == VerdictPassed; got != c.pass {
				t.Errorf("verdict %s, want passed=%v: %+v", rep.Verdict, c.pass, rep)
			}
		})
	}
}

// TestRestrictedGoWork: in restricted mode a program can write to the directories above the
// sandbox's base (world-writable /tmp); a go.work there must not break later Go builds.
func TestRestrictedGoWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	s := newSandbox(t, Config{Mode: ModeRestricted})
	needPython(t, s)
	above := filepath.Dir(s.Config().BaseDir) // stands for /tmp
	if err := os.Chmod(above, 0o1777); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(above, "go.work")
	src := fmt.Sprintf("open(%q, 'w').write('go 1.20\\n\\nuse ./nowhere\\n')\nprint('planted')\n", work)
	rep, err := s.Check(t.Context(), Program{Language: Python, Source: src}, []TestCase{{Stdout: "planted"}}, Limits{})
	if err != nil || rep.Verdict != VerdictPassed {
		t.Fatalf("planting go.work: %+v %v", rep, err)
	}
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("go.work was not planted: %v", err)
	}
	double := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar n int\n\tfmt.Scan(&n)\n\tfmt.Println(2 * n)\n}\n"
	rep, err = s.Check(t.Context(), Program{Language: Go, Source: double}, []TestCase{{Stdin: "21", Stdout: "42"}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictPassed {
		t.Errorf("a planted go.work broke the build: %+v", rep)
	}
}

// TestMoreHostilePrograms: what else an attacker tries once the holes above are closed.
func TestMoreHostilePrograms(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	py := func(t *testing.T, s *Sandbox, src string, lim Limits) Result {
		t.Helper()
		r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", src}, Limits: lim})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%q: %q %q", r.Failure(), head(string(r.Stdout), 200), head(lastLine(string(r.Stderr)), 200))
		return r
	}
	noneLeft := func(t *testing.T, s *Sandbox) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for len(slotProcesses(s)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox processes outlived the run: %v", slotProcesses(s))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	t.Run("thread bomb", func(t *testing.T) {
		src := "import threading, time\nts = []\nfor _ in range(1000):\n    t = threading.Thread(target=time.sleep, args=(2,))\n    t.start()\n    ts.append(t)\nprint('started', len(ts))\n"
		// 2 GiB of address space: glibc reserves 64 MiB per thread, which would stop it first.
		r := py(t, s, src, Limits{Timeout: 3 * time.Second, Procs: 16, Memory: 2 << 30})
		if r.Failure() == "" || r.Limit != LimitProcs && s.cg != nil {
			t.Errorf("1000 threads under a 16-task limit: failure %q, limit %q", r.Failure(), r.Limit)
		}
		noneLeft(t, s)
	})

	t.Run("setsid and double fork, parent exits 0", func(t *testing.T) {
		src := "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        while True:\n            time.sleep(0.05)\n    os._exit(0)\nprint('bye')\n"
		py(t, s, src, Limits{Timeout: 5 * time.Second})
		noneLeft(t, s)
	})

	t.Run("stderr flood", func(t *testing.T) {
		src := "import os\nb = b'e' * (1 << 20)\nfor _ in range(200):\n    os.write(2, b)\nprint('ok')\n"
		start := time.Now()
		r := py(t, s, src, Limits{Timeout: 10 * time.Second})
		if len(r.Stderr) > stderrCap {
			t.Errorf("kept %d bytes of stderr, cap %d", len(r.Stderr), stderrCap)
		}
		if r.TimedOut || time.Since(start) > 8*time.Second {
			t.Errorf("a 200 MiB stderr stalled the run: %v", time.Since(start))
		}
	})

	t.Run("signal the worker, restricted", func(t *testing.T) {
		rs := newSandbox(t, Config{Mode: ModeRestricted})
		src := fmt.Sprintf("import os, signal\nres = []\nfor pid in (os.getppid(), %d, 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n        res.append('killed %%d' %% pid)\n    except OSError as e:\n        res.append('refused %%d' %% pid)\nprint(res)\n", os.Getpid())
		r := py(t, rs, src, Limits{Timeout: 5 * time.Second})
		if strings.Contains(string(r.Stdout), "killed") {
			t.Errorf("a restricted program signalled a host process: %s", r.Stdout)
		}
	})

	t.Run("shared memory left behind, restricted", func(t *testing.T) {
		rs := newSandbox(t, Config{Mode: ModeRestricted})
		name := "temper-hoard-" + randomName(t)
		src := fmt.Sprintf("import os\nfor d in ('/dev/shm', '/tmp'):\n    try:\n        open(os.path.join(d, %q), 'wb').write(b'x' * (8 << 20))\n    except OSError:\n        pass\nprint('left')\n", name)
		py(t, rs, src, Limits{Timeout: 5 * time.Second})
		for _, d := range []string{"/dev/shm", "/tmp"} {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				_ = os.Remove(filepath.Join(d, name))
				t.Errorf("%s/%s outlived the run", d, name)
			}
		}
	})
}

// TestOrdinaryProgramsStillWork: the filter and limits must not break what honest programs do:
// threads, fork, subprocesses (libc falls back from clone3 to clone), pipes, socketpair,
// asyncio, memory-mapped files.
func TestOrdinaryProgramsStillWork(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	src := `import asyncio, mmap, os, socket, subprocess, sys, threading
out = []
t = threading.Thread(target=lambda: out.append("thread")); t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
out.append("fork %d" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
out.append("subprocess %d" % subprocess.run([sys.executable, "-c", "pass"]).returncode)
r, w = os.pipe(); os.write(w, b"p"); out.append("pipe " + os.read(r, 1).decode())
a, b = socket.socketpair(); a.send(b"s"); out.append("socketpair " + b.recv(1).decode())
async def main():
    await asyncio.sleep(0)
    return "asyncio"
out.append(asyncio.run(main()))
with open("f", "wb") as f:
    f.write(b"m" * 4096)
with open("f", "r+b") as f:
    out.append("mmap " + mmap.mmap(f.fileno(), 0)[:1].decode())
print(", ".join(out))
`
	r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-c", src}})
	if err != nil {
		t.Fatal(err)
	}
	want := "thread, fork 7, subprocess 0, pipe p, socketpair s, asyncio, mmap m"
	if got := strings.TrimSpace(string(r.Stdout)); got != want || r.Failure() != "" {
		t.Errorf("got %q (%s), want %q: %s", got, r.Failure(), want, r.Stderr)
	}
}

// TestLeftoverKeys: of /proc/keys, only the uid's keys other than its own keyrings hold up a run.
func TestLeftoverKeys(t *testing.T) {
	keys := `0b1c2d3e I--Q---     1 perm 3f030000 1600001 1600001 keyring   _ses: 1
1a2b3c4d I--Q---     2 perm 3f010000 1600001 1600001 keyring   _uid.1600001: empty
2a2b3c4d I--Q---     1 perm 3f3f3f3f 1600002 1600002 user      other-slot: 8
3a2b3c4d I--Q---     1 perm 3f3f3f3f 1600001 1600001 user      temper-leak-x: 20
`
	own := map[uint64]bool{0x0b1c2d3e: true, 0x1a2b3c4d: true}
	if got := leftoverKeys(keys, "1600001", own); !strings.Contains(got, "temper-leak-x") {
		t.Errorf("leftover = %q, want the planted user key", got)
	}
	if got := leftoverKeys(keys, "1600003", own); got != "" {
		t.Errorf("another uid's leftover = %q, want none", got)
	}
	own[0x3a2b3c4d] = true
	if got := leftoverKeys(keys, "1600001", own); got != "" {
		t.Errorf("with every key its own: %q", got)
	}
}
