package sandbox

import (
	"strings"
	"time"
)

// Language of a Program.
type Language string

// Languages Check runs.
const (
	Python Language = "python"
	Go     Language = "go"
)

// MaxSource bounds Program.Source and Program.GoTest.
const MaxSource = 1 << 20

// Program is a candidate solution.
type Program struct {
	Language Language `json:"language"`
	Source   string   `json:"source"`
	// GoTest, for Go only, is a _test.go file of the same package as Source: the program passes
	// when `go test` passes (test cases are then not used).
	GoTest string `json:"go_test,omitempty"`
}

// TestCase feeds Stdin and expects Stdout. Outputs are compared line by line after trimming
// trailing spaces, tabs and carriage returns, and ignoring trailing empty lines.
type TestCase struct {
	Stdin  string `json:"stdin"`
	Stdout string `json:"stdout"`
}

// CaseResult is one test case's outcome.
type CaseResult struct {
	Passed bool   `json:"passed"`
	Reason string `json:"reason,omitempty"` // "wrong output", "timeout", "exit status 1", ...
	// Stdout (first 512 bytes) and Stderr (last 1 KiB) of the run, for feedback.
	Stdout   string        `json:"stdout,omitempty"`
	Stderr   string        `json:"stderr,omitempty"`
	ExitCode int           `json:"exit_code"`
	Elapsed  time.Duration `json:"elapsed"`
}

// Report is the outcome of Check.
type Report struct {
	Verdict string       `json:"verdict"` // VerdictPassed or VerdictFailed
	Reason  string       `json:"reason,omitempty"`
	Passed  int          `json:"passed"`
	Total   int          `json:"total"`
	Cases   []CaseResult `json:"cases,omitempty"`
	// Build holds the compiler's output (last 2 KiB) when a Go build failed.
	Build string `json:"build,omitempty"`
	Mode  Mode   `json:"mode"`
}

func sameOutput(got, want string) bool { return normOutput(got) == normOutput(want) }

func normOutput(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return strings.Join(lines, "\n")
}

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
