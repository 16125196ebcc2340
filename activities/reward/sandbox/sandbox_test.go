//go:build linux

// Over 500 lines on purpose: the sandbox tests (isolation, hostile programs, languages, worker death) share one fixture.

package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testGoCache survives test runs so that only the first run pays for compiling the standard
// library.
var testGoCache = filepath.Join(os.TempDir(), "temper-sandbox-test-gocache")

func newSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	base, err := os.MkdirTemp("", "temper-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o711); err != nil {
		t.Fatal(err)
	}
	cfg.BaseDir = filepath.Join(base, "sb")
	cfg.GoCache = cmp.Or(cfg.GoCache, testGoCache)
	if cfg.Mode == ModeRestricted && cfg.UIDBase == 0 {
		// A restricted sandbox ends its runs with kill(-1) as the slot uid: its own uids keep it
		// from killing the runs of sandboxes with the default uids in other test processes
		// (go test runs packages in parallel), and its own cache from taking theirs over.
		cfg.UIDBase = 1700000
		cfg.GoCache = testGoCache + "-restricted"
	}
	if cfg.UIDBase == 0 {
		// The other modes too: this package's checks that no process of a slot uid is left (and
		// the per-uid task limit) would otherwise count the sandboxed runs of other packages'
		// tests (reward, tools, rollout agents) that go test runs at the same time.
		cfg.UIDBase = testUIDBase
	}
	cfg.Slots = cmp.Or(cfg.Slots, 4)
	s, err := New(cfg)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("no sandbox on this machine: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox mode %s %s", s.Mode(), s.ModeReason())
	return s
}

func randomName(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func needPython(t *testing.T, s *Sandbox) {
	t.Helper()
	if s.Config().Python == "" {
		t.Skip("no python3 on this machine")
	}
}

// slotProcesses lists live (not zombie) processes owned by the sandbox's uids (builder and slots).
// testUIDBase is this package's tests' uid range (newSandbox): apart from the default one that
// other packages' tests use at the same time.
const testUIDBase = 1800000

func slotProcesses(s *Sandbox) []string {
	lo, hi := s.cfg.UIDBase, s.cfg.UIDBase+s.cfg.Slots
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if uid, err := strconv.Atoi(procUID(string(b))); err == nil && uid >= lo && uid <= hi {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestConfigValidate(t *testing.T) {
	bad := []struct {
		cfg  Config
		want string
	}{
		{Config{Mode: "docker"}, `mode="docker": allowed values`},
		{Config{UIDBase: 10}, "uid_base=10"},
		{Config{Slots: -1}, "slots=-1"},
		{Config{Limits: Limits{Procs: 2}}, "procs=2"},
		{Config{Limits: Limits{Memory: 1}}, "memory=1"},
		{Config{BuildLimits: Limits{Timeout: -time.Second}}, "build_limits"},
	}
	for _, b := range bad {
		err := b.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: err = %v, want %q", b.cfg, err, b.want)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Error(err)
	}
	if !sameOutput("1 \n2\r\n\n\n", "1\n2") || sameOutput("1\n2", "1\n3") || sameOutput("12", "1 2") {
		t.Error("sameOutput")
	}
	if got := outermost([]string{"/usr", "/usr/local/go", "/etc", "/usr", "/root/.pyenv/versions/3"}); strings.Join(got, ",") != "/usr,/etc,/root/.pyenv/versions/3" {
		t.Errorf("outermost = %v", got)
	}
}

const pySum = "a, b = map(int, input().split())\nprint(a + b)\n"

func TestPythonPassesAndFails(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	cases := []TestCase{{Stdin: "1 2\n", Stdout: "3\n"}, {Stdin: "-5 5", Stdout: "0"}}
	rep, err := s.Check(t.Context(), Program{Language: Python, Source: pySum}, cases, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictPassed || rep.Passed != 2 {
		t.Fatalf("correct program: %+v", rep)
	}
	rep, err = s.Check(t.Context(), Program{Language: Python, Source: "print(3)"}, cases, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed || rep.Passed != 1 || rep.Cases[1].Reason != "wrong output" {
		t.Fatalf("wrong program: %+v", rep)
	}
	rep, err = s.Check(t.Context(), Program{Language: Python, Source: "raise SystemExit(3)"}, cases[:1], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed || rep.Cases[0].Reason != "exit status 3" {
		t.Fatalf("exit 3: %+v", rep)
	}
	rep, err = s.Check(t.Context(), Program{Language: Python, Source: "def f(:\n"}, cases[:1], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed || !strings.Contains(rep.Cases[0].Stderr, "SyntaxError") {
		t.Fatalf("syntax error: %+v", rep)
	}
	if _, err := s.Check(t.Context(), Program{Language: "ruby", Source: "x"}, cases, Limits{}); err == nil || !strings.Contains(err.Error(), "allowed values") {
		t.Errorf("unknown language: %v", err)
	}
}

// protections runs a probe program that reports what it sees, and returns nil only when every
// protection the dangerous tests rely on is in force: an unprivileged uid, a small RLIMIT_NPROC,
// a private PID namespace, no network but a downed loopback, an address-space limit.
func protections(t *testing.T, s *Sandbox) error {
	t.Helper()
	if s.Mode() != ModeIsolated {
		return fmt.Errorf("mode is %s, not %s (%s)", s.Mode(), ModeIsolated, s.ModeReason())
	}
	src := `import os, resource
print(os.getuid(), os.geteuid(), os.getgid())
print(resource.getrlimit(resource.RLIMIT_NPROC)[0])
print(resource.getrlimit(resource.RLIMIT_AS)[0])
print(os.getpid())
print(len([p for p in os.listdir("/proc") if p.isdigit()]))
print(",".join(sorted(os.listdir("/sys/class/net"))) if os.path.exists("/sys/class/net") else "nosys")
print(open("/proc/net/dev").read().count(":"))
print(os.getcwd(), os.path.exists("/tmp"), os.path.exists("/root"), os.path.exists("/work"))
`
	r, err := s.Run(t.Context(), Command{Path: s.Config().Python, Args: []string{"-I", "-c", src}, Limits: Limits{Timeout: 10 * time.Second, Procs: 16}})
	if err != nil {
		return err
	}
	if r.Failure() != "" {
		return fmt.Errorf("probe failed: %s: %s", r.Failure(), r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(r.Stdout)), "\n")
	t.Logf("probe: %q", lines)
	if len(lines) != 8 {
		return fmt.Errorf("probe output: %q", lines)
	}
	ids := strings.Fields(lines[0])
	for _, id := range ids {
		if n, _ := strconv.Atoi(id); n < s.cfg.UIDBase {
			return fmt.Errorf("runs as uid/gid %s, not an unprivileged sandbox uid", lines[0])
		}
	}
	if n, _ := strconv.Atoi(lines[1]); n < 16 || n > 18 {
		return fmt.Errorf("RLIMIT_NPROC is %s, want 16 (18 with a cgroup's pids.max of 16)", lines[1])
	}
	if n, _ := strconv.ParseInt(lines[2], 10, 64); n <= 0 || n > 1<<30 {
		return fmt.Errorf("RLIMIT_AS is %s", lines[2])
	}
	if lines[3] != "1" || lines[4] != "1" {
		return fmt.Errorf("not alone in a PID namespace: pid %s, %s processes visible", lines[3], lines[4])
	}
	if lines[6] != "1" { // only lo in /proc/net/dev
		return fmt.Errorf("network namespace shows %s interfaces", lines[6])
	}
	if lines[7] != "/work False False True" {
		return fmt.Errorf("filesystem view: %s", lines[7])
	}
	return nil
}

func TestIsolationProtections(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	if err := protections(t, s); err != nil {
		if s.Mode() == ModeIsolated {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// TestHostileProgramsFail runs programs that attack the host. Each must end with verdict
// "failed" within its time limit and leave no trace on the host.
func TestHostileProgramsFail(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	protected := protections(t, s)
	check := func(t *testing.T, src string, tc TestCase, lim Limits) Report {
		t.Helper()
		start := time.Now()
		rep, err := s.Check(t.Context(), Program{Language: Python, Source: src}, []TestCase{tc}, lim)
		if err != nil {
			t.Fatal(err)
		}
		limit := lim.Timeout
		if limit == 0 {
			limit = s.Config().Limits.Timeout
		}
		if el := time.Since(start); el > limit+5*time.Second {
			t.Errorf("took %v with a %v limit", el, limit)
		}
		if rep.Verdict != VerdictFailed {
			t.Fatalf("verdict %s, want failed: %+v", rep.Verdict, rep)
		}
		t.Logf("failed as expected: %s (%v)", rep.Reason, time.Since(start).Round(time.Millisecond))
		return rep
	}

	t.Run("infinite loop", func(t *testing.T) {
		rep := check(t, "while True:\n    pass\n", TestCase{Stdout: "done"}, Limits{Timeout: time.Second})
		if rep.Cases[0].Reason != "timeout" {
			t.Errorf("reason %q, want timeout", rep.Cases[0].Reason)
		}
	})

	t.Run("fork bomb", func(t *testing.T) {
		if protected != nil {
			t.Skipf("SKIP fork bomb: protections not established (%v); refusing to run it unprotected", protected)
		}
		src := "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
		check(t, src, TestCase{Stdout: "done"}, Limits{Timeout: 2 * time.Second, Procs: 16})
	})

	t.Run("10 GB allocation", func(t *testing.T) {
		if protected != nil {
			t.Skipf("SKIP: protections not established (%v)", protected)
		}
		rep := check(t, "b = bytearray(10 * 1024**3)\nprint(len(b))\n", TestCase{Stdout: str(10 << 30)}, Limits{Timeout: 3 * time.Second})
		if !strings.Contains(rep.Cases[0].Stderr, "MemoryError") {
			t.Errorf("stderr %q, want MemoryError", rep.Cases[0].Stderr)
		}
	})

	t.Run("1 GB to stdout", func(t *testing.T) {
		src := "import sys\nb = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(b)\n"
		rep := check(t, src, TestCase{Stdout: "x"}, Limits{Timeout: 10 * time.Second})
		if rep.Cases[0].Reason != "output limit exceeded" {
			t.Errorf("reason %q", rep.Cases[0].Reason)
		}
	})

	t.Run("network", func(t *testing.T) {
		if protected != nil {
			t.Skipf("SKIP: no network namespace (%v)", protected)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := countAccepts(ln)
		port := ln.Addr().(*net.TCPAddr).Port
		src := fmt.Sprintf("import socket\ns = socket.create_connection(('127.0.0.1', %d), timeout=2)\ns.sendall(b'hi')\nprint('connected')\n", port)
		rep := check(t, src, TestCase{Stdout: "connected"}, Limits{Timeout: 5 * time.Second})
		time.Sleep(100 * time.Millisecond)
		if n := accepted.Load(); n != 0 {
			t.Errorf("the host listener accepted %d connections", n)
		}
		t.Logf("stderr: %s", lastLine(rep.Cases[0].Stderr))
	})

	t.Run("write outside the work dir", func(t *testing.T) {
		name := "escape-" + randomName(t)
		targets := []string{"/tmp/" + name, "/" + name, "/work/../" + name, "/usr/" + name, "/dev/shm/" + name, "/var/tmp/" + name, "/etc/" + name}
		src := fmt.Sprintf(`wrote = []
for p in %s:
    try:
        with open(p, "w") as f:
            f.write("x")
        wrote.append(p)
    except OSError as e:
        pass
print("escaped" if wrote else "contained", wrote)
`, pyList(targets))
		rep := check(t, src, TestCase{Stdout: "escaped"}, Limits{Timeout: 5 * time.Second})
		for _, p := range []string{"/tmp/" + name, "/" + name, "/usr/" + name, "/dev/shm/" + name, "/var/tmp/" + name, "/etc/" + name} {
			if _, err := os.Stat(p); err == nil {
				_ = os.Remove(p)
				t.Errorf("%s exists on the host", p)
			}
		}
		if protected == nil && !strings.HasPrefix(rep.Cases[0].Stdout, "contained") {
			t.Errorf("isolated program could write: %s", rep.Cases[0].Stdout)
		}
	})

	t.Run("read another sandbox", func(t *testing.T) {
		secret := "s3cret-" + randomName(t)
		// A's program holds a secret (think: another candidate's solution) and runs long
		// enough for B to try to read it.
		writer := fmt.Sprintf("import time\nSECRET = %q\nopen('copy.txt', 'w').write(SECRET)\ntime.sleep(3)\nprint('ok')\n", secret)
		var wg sync.WaitGroup
		var repA Report
		var errA error
		wg.Add(1)
		go func() {
			defer wg.Done()
			repA, errA = s.Check(context.Background(), Program{Language: Python, Source: writer}, []TestCase{{Stdout: "ok"}}, Limits{Timeout: 8 * time.Second})
		}()
		var path string
		deadline := time.Now().Add(5 * time.Second)
		for path == "" && time.Now().Before(deadline) {
			m, _ := filepath.Glob(filepath.Join(s.Config().BaseDir, "run-*", "main.py"))
			for _, p := range m {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
					path = p
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		if path == "" {
			wg.Wait()
			t.Fatalf("writer's files never appeared: %+v %v", repA, errA)
		}
		time.Sleep(200 * time.Millisecond) // let A start and write its copy
		// B knows A's host path and tries it, every other sandbox directory, and A's /proc.
		reader := fmt.Sprintf(`import glob, re
paths = [%q] + glob.glob(%q) + glob.glob("/proc/*/root/work/*") + glob.glob("/proc/*/cwd/*")
for p in paths:
    try:
        m = re.search(r"s3cret-[0-9a-f]+", open(p).read())
        if m:
            print(m.group(0))
            break
    except OSError:
        pass
`, path, filepath.Join(s.Config().BaseDir, "run-*", "*"))
		rep := check(t, reader, TestCase{Stdout: secret}, Limits{Timeout: 5 * time.Second})
		if strings.Contains(rep.Cases[0].Stdout, secret) {
			t.Errorf("B read A's secret")
		}
		wg.Wait()
		if errA != nil || repA.Verdict != VerdictPassed {
			t.Errorf("writer: %+v %v", repA, errA)
		}
	})

	t.Run("fill the disk", func(t *testing.T) {
		if protected != nil {
			t.Skipf("SKIP: no private work directory (%v)", protected)
		}
		// 100 files of 8 MiB against a 64 MiB work directory.
		src := "import os\nfor i in range(100):\n    with open('f%d' % i, 'wb') as f:\n        f.write(os.urandom(8 << 20))\nprint('filled')\n"
		rep := check(t, src, TestCase{Stdout: "filled"}, Limits{Timeout: 10 * time.Second, Memory: 256 << 20})
		if !strings.Contains(rep.Cases[0].Stderr, "No space left") {
			t.Errorf("stderr %q, want ENOSPC", rep.Cases[0].Stderr)
		}
	})

	if left := slotProcesses(s); len(left) > 0 {
		time.Sleep(500 * time.Millisecond)
		if left = slotProcesses(s); len(left) > 0 {
			t.Errorf("sandbox processes left on the host: %v", left)
		}
	}
}

func TestGoPrograms(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs (a cold build cache compiles the standard library)")
	}
	s := newSandbox(t, Config{})
	double := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar n int\n\tfmt.Scan(&n)\n\tfmt.Println(2 * n)\n}\n"
	cases := []TestCase{{Stdin: "21\n", Stdout: "42\n"}, {Stdin: "-4", Stdout: "-8"}}
	start := time.Now()
	rep, err := s.Check(t.Context(), Program{Language: Go, Source: double}, cases, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictPassed || rep.Passed != 2 {
		t.Fatalf("correct Go program: %+v", rep)
	}
	t.Logf("correct program: %v", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	rep, err = s.Check(t.Context(), Program{Language: Go, Source: "package main\n\nfunc main() {\n\tfor {\n\t}\n}\n"}, cases, Limits{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed || rep.Cases[0].Reason != "timeout" || !strings.HasPrefix(rep.Cases[1].Reason, "not run") {
		t.Fatalf("infinite loop: %+v", rep)
	}
	t.Logf("infinite loop: %v", time.Since(start).Round(time.Millisecond))

	rep, err = s.Check(t.Context(), Program{Language: Go, Source: "package main\n\nfunc main() { undefined() }\n"}, cases, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed || !strings.Contains(rep.Build, "undefined") {
		t.Fatalf("compile error: %+v", rep)
	}

	rep, err = s.Check(t.Context(), Program{Language: Go, Source: "package main\n\nfunc main() { b := make([]byte, 10<<30); b[len(b)-1] = 1 }\n"}, cases[:1], Limits{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed {
		t.Fatalf("10 GB in Go: %+v", rep)
	}

	sol := "package sol\n\nfunc Add(a, b int) int { return a + b }\n"
	harness := "package sol\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n"
	rep, err = s.Check(t.Context(), Program{Language: Go, Source: sol, GoTest: harness}, nil, Limits{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictPassed {
		t.Fatalf("harness, correct: %+v", rep)
	}
	rep, err = s.Check(t.Context(), Program{Language: Go, Source: strings.Replace(sol, "a + b", "a - b", 1), GoTest: harness}, nil, Limits{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != VerdictFailed {
		t.Fatalf("harness, wrong: %+v", rep)
	}
}

// countAccepts accepts and closes connections on ln until it is closed, counting them.
func countAccepts(ln net.Listener) *atomic.Int32 {
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return &n
}

func str(n int) string { return strconv.Itoa(n) }

func pyList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestManyRuns guards the helper's ordering: limits are set last, so that the Go helper never
// runs out of address space before it execs (this used to fail one run in ~20).
func TestManyRuns(t *testing.T) {
	s := newSandbox(t, Config{})
	for i := 0; i < 100; i++ {
		r, err := s.Run(t.Context(), Command{Path: "/bin/true", Limits: Limits{Timeout: 5 * time.Second, Memory: 64 << 20}})
		if err != nil {
			t.Fatal(err)
		}
		if f := r.Failure(); f != "" {
			t.Fatalf("run %d: %s: %s", i, f, head(string(r.Stderr), 2000))
		}
	}
	if _, err := s.Run(t.Context(), Command{Path: "/no/such/binary"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing binary: err = %v", err)
	}
}

// TestRestrictedMode exercises the fallback without namespaces: uid, rlimits, process group and
// uid sweep. Only harmless hostile programs run here (no fork bomb: there is no PID namespace).
func TestRestrictedMode(t *testing.T) {
	s := newSandbox(t, Config{Mode: ModeRestricted})
	needPython(t, s)
	if s.Mode() != ModeRestricted {
		t.Fatalf("mode %s", s.Mode())
	}
	cases := []TestCase{{Stdin: "1 2", Stdout: "3"}}
	rep, err := s.Check(t.Context(), Program{Language: Python, Source: pySum}, cases, Limits{})
	if err != nil || rep.Verdict != VerdictPassed {
		t.Fatalf("correct program: %+v %v", rep, err)
	}
	// A loop that escapes its process group: the uid sweep still ends it.
	escape := "import os, time\nif os.fork() == 0:\n    os.setsid()\n    while True:\n        time.sleep(0.1)\nwhile True:\n    pass\n"
	rep, err = s.Check(t.Context(), Program{Language: Python, Source: escape}, cases, Limits{Timeout: time.Second})
	if err != nil || rep.Verdict != VerdictFailed || rep.Cases[0].Reason != "timeout" {
		t.Fatalf("escaping loop: %+v %v", rep, err)
	}
	rep, err = s.Check(t.Context(), Program{Language: Python, Source: "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"}, cases, Limits{Timeout: 5 * time.Second})
	if err != nil || rep.Verdict != VerdictFailed || rep.Cases[0].Reason != "output limit exceeded" {
		t.Fatalf("stdout flood: %+v %v", rep, err)
	}
	if left := slotProcesses(s); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// procUID returns the real uid of a live process from its /proc status, or "" for a zombie
// (already dead; only its parent can reap it).
func procUID(status string) string {
	uid := ""
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "State:" && (f[1] == "Z" || f[1] == "X"):
			return ""
		case len(f) >= 2 && f[0] == "Uid:":
			uid = f[1]
		}
	}
	return uid
}

// TestWorkerDeathKillsSandboxes kills a worker process mid-run: its sandboxed program must die
// with it (parent-death signal), not linger as an orphan.
func TestWorkerDeathKillsSandboxes(t *testing.T) {
	const workerEnv = "TEMPER_SANDBOX_TEST_WORKER"
	if base := os.Getenv(workerEnv); base != "" {
		// The doomed worker: start a long sleeper and wait to be killed.
		s, err := New(Config{BaseDir: base, Slots: 1, UIDBase: testUIDBase})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = s.Run(context.Background(), Command{Path: s.Config().Python, Args: []string{"-c", "import time; time.sleep(60)"}, Limits: Limits{Timeout: time.Minute}})
		return
	}
	s := newSandbox(t, Config{})
	needPython(t, s)
	base := filepath.Join(filepath.Dir(s.Config().BaseDir), "worker")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerDeathKillsSandboxes$")
	cmd.Env = append(os.Environ(), workerEnv+"="+base)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for len(slotProcesses(s)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the worker's sandbox never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for len(slotProcesses(s)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandboxed processes outlived their worker: %v", slotProcesses(s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
