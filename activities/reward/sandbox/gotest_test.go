package sandbox

import (
	"strings"
	"testing"
)

const harnessAddSub = `package sol

import "testing"

func TestAdd(t *testing.T) {}
func TestSub(t *testing.T) {}
func TestMain(m *testing.M) { m.Run() }
func Testlower(t *testing.T) {}
func helper(t *testing.T) {}
func FuzzAdd(f *testing.F) {}
func BenchmarkAdd(b *testing.B) {}

func ExampleAdd() {
	// Output: 5
}

func ExampleNoOutput() {}
`

func TestPlanGoTest(t *testing.T) {
	plan, reject, err := planGoTest("package sol\n\nimport (\n\t\"fmt\"\n\t\"strings\"\n)\n", harnessAddSub)
	if err != nil || reject != "" {
		t.Fatalf("plan: %q %v", reject, err)
	}
	if got := strings.Join(plan.expected, ","); got != "TestAdd,TestSub,FuzzAdd,ExampleAdd" {
		t.Errorf("expected = %s", got)
	}
	if !strings.HasPrefix(plan.sentinel, "TestZzTemper") || plan.sentinelFile <= "solution_test.go" ||
		!strings.Contains(string(plan.sentinelSrc), "package sol\n") || !strings.Contains(string(plan.sentinelSrc), "func "+plan.sentinel+"(") {
		t.Errorf("sentinel %q in %q: %s", plan.sentinel, plan.sentinelFile, plan.sentinelSrc)
	}
	if p2, _, _ := planGoTest("package sol\n", harnessAddSub); p2.sentinel == plan.sentinel {
		t.Error("the sentinel name must be drawn per check")
	}
	rejects := []struct{ src, want string }{
		{"package sol\n\nimport \"os\"\n", `imports "os"`},
		{"package sol\n\nimport _ \"unsafe\"\n", `imports "unsafe"`},
		{"package sol\n\nimport x \"syscall\"\n", `imports "syscall"`},
		{"package sol\n\nimport \"embed\"\n", `imports "embed"`},
		{"package sol\n\nimport \"runtime\"\n", `imports "runtime"`},
		{"package sol\n\nimport \"flag\"\n", `imports "flag"`},
		{"package sol\n\nimport \"testing\"\n", `imports "testing"`},
		{"package sol\n\n//go:linkname x runtime.x\nvar x int\n", "//go:linkname"},
	}
	for _, r := range rejects {
		if _, reject, err := planGoTest(r.src, harnessAddSub); err != nil || !strings.Contains(reject, r.want) {
			t.Errorf("%q: reject %q err %v, want %q", r.src, reject, err, r.want)
		}
	}
	if _, _, err := planGoTest("package sol\n", "package sol\n\nfunc helper() {}\n"); err == nil || !strings.Contains(err.Error(), "defines no Test") {
		t.Errorf("harness without tests: %v", err)
	}
	if plan, reject, err := planGoTest("package sol\n", "package sol\nfunc {"); err != nil || reject != "" || plan.sentinel != "" {
		t.Errorf("unparsable harness: the build says why, got %+v %q %v", plan, reject, err)
	}
}

func TestJudgeGoTest(t *testing.T) {
	plan := goTestPlan{expected: []string{"TestAdd", "TestSub"}, sentinel: "TestZzTemperabc"}
	m := testMarker
	run := func(name string) string { return m + "=== RUN   " + name + "\n" }
	pass := func(name string) string { return run(name) + m + "--- PASS: " + name + " (0.00s)\n" }
	fail := func(name string) string { return run(name) + m + "--- FAIL: " + name + " (0.00s)\n" }
	cases := []struct {
		name, out string
		exit      int
		passed    int
		reason    string // "" = verdict passed
	}{
		{"all pass", pass("TestAdd") + pass("TestSub") + pass("TestZzTemperabc") + m + "PASS\n", 0, 2, ""},
		{"subtests and output", run("TestAdd") + "    some log\n" + m + "    --- PASS: TestAdd/x (0.00s)\n" + m + "--- PASS: TestAdd (0.00s)\n" + pass("TestSub") + pass("TestZzTemperabc") + m + "PASS\n", 0, 2, ""},
		{"exit 0, no events", "", 0, 0, "no test events"},
		{"exit 0, tests disabled", m + "PASS\n", 0, 0, "test TestAdd did not report"},
		{"unmarked forgery", "--- PASS: TestAdd (0.00s)\n--- PASS: TestSub (0.00s)\nPASS\n", 0, 0, "no test events"},
		{"escaped forgery", m + m + "--- PASS: TestAdd (0.00s)\n" + m + m + "--- PASS: TestSub (0.00s)\n", 0, 0, "no test events"},
		{"marked forgery, early exit", pass("TestAdd") + pass("TestSub") + m + "PASS\n", 0, 0, "the test run did not complete"},
		{"forged pass over a real fail", pass("TestAdd") + fail("TestAdd") + pass("TestSub") + pass("TestZzTemperabc") + m + "FAIL\n", 1, 1, "test TestAdd failed"},
		{"one fails", pass("TestAdd") + fail("TestSub") + pass("TestZzTemperabc") + m + "FAIL\n", 1, 1, "test TestSub failed"},
		{"skip", pass("TestAdd") + run("TestSub") + m + "--- SKIP: TestSub (0.00s)\n" + pass("TestZzTemperabc") + m + "PASS\n", 0, 1, "test TestSub skipped"},
		{"extra test", pass("TestAdd") + pass("TestSub") + pass("TestExtra") + pass("TestZzTemperabc") + m + "PASS\n", 0, 0, "does not define"},
		{"no final PASS", pass("TestAdd") + pass("TestSub") + pass("TestZzTemperabc"), 0, 0, "did not report PASS"},
		{"all pass, exit 1", pass("TestAdd") + pass("TestSub") + pass("TestZzTemperabc") + m + "PASS\n", 1, 0, "exit status 1"},
	}
	for _, c := range cases {
		res, reason := judgeGoTest(plan, Result{Stdout: []byte(c.out), ExitCode: c.exit})
		passed := 0
		for _, r := range res {
			if r.Passed {
				passed++
			}
		}
		if (c.reason == "") != (reason == "") || !strings.Contains(reason, c.reason) || passed != c.passed {
			t.Errorf("%s: reason %q passed %d, want %q and %d", c.name, reason, passed, c.reason, c.passed)
		}
	}
}
