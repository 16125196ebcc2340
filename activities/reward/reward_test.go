package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

func mathFormatSpec() verify.Spec {
	return verify.Spec{Verifiers: []verify.Component{
		{Name: "math", Weight: 1},
		{Name: "format", As: "tags", Weight: 1, Params: json.RawMessage(`{"tags": ["think", "answer"]}`)},
	}}
}

func items() []rewardapi.Item {
	r := json.RawMessage(`{"answer": "1/2"}`)
	return []rewardapi.Item{
		{ID: "right", Completion: "<think>half</think><answer>0.5</answer>", Reference: r},
		{ID: "wrong", Completion: "<think>x</think><answer>0.25</answer>", Reference: r},
		{ID: "untagged", Completion: `\boxed{\frac{1}{2}}`, Reference: r},
		{ID: "no-reference", Completion: "<answer>1</answer>"},
		{ID: "hedged", Completion: "<think>?</think><answer>0.5</answer><answer>0.25</answer>", Reference: r},
	}
}

func TestScoreItems(t *testing.T) {
	a := NewActivities(nil)
	var mu sync.Mutex
	var last rewardapi.Progress
	out, err := a.ScoreItems(context.Background(), rewardapi.ScoreInput{Items: items(), Spec: mathFormatSpec(), Workers: 3},
		func(p rewardapi.Progress) { mu.Lock(); last = p; mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	if last != (rewardapi.Progress{Step: 5, Total: 5}) {
		t.Errorf("last progress %+v", last)
	}
	// Hand-computed: right = (1+1)/2; wrong = (0+1)/2; untagged = (1+0)/2; hedged: math fails
	// (two answers), format: think ok, answer twice → 1/2; score (0+0.5)/2.
	want := []struct {
		id    string
		score float64
		pass  bool
		err   string
	}{
		{"right", 1, true, ""},
		{"wrong", 0.5, false, ""},
		{"untagged", 0.5, false, ""},
		{"no-reference", 0, false, "reference has no answer"},
		{"hedged", 0.25, false, ""},
	}
	for i, w := range want {
		v := out.Verdicts[i]
		if v.ID != w.id || math.Abs(v.Score-w.score) > 1e-12 || v.Pass != w.pass || !strings.Contains(v.Error, w.err) || (w.err == "") != (v.Error == "") {
			t.Errorf("verdict %d = %+v, want %+v", i, v, w)
		}
	}
	m := out.Metrics
	if m.Items != 5 || m.Judged != 4 || m.Errors != 1 || m.TimedOut != 0 {
		t.Errorf("counts %+v", m)
	}
	if math.Abs(m.MeanScore-(1+0.5+0.5+0.25)/4) > 1e-12 || m.PassRate != 0.25 {
		t.Errorf("means %+v", m)
	}
	if len(m.Verifiers) != 2 || m.Verifiers[0].Name != "math" || m.Verifiers[1].Name != "tags" ||
		math.Abs(m.Verifiers[0].MeanScore-0.5) > 1e-12 || math.Abs(m.Verifiers[1].MeanScore-(1+1+0+0.5)/4) > 1e-12 {
		t.Errorf("per-verifier %+v", m.Verifiers)
	}
	if !strings.Contains(out.Verdicts[1].Feedback, "math:") {
		t.Errorf("feedback %q should name the verifier", out.Verdicts[1].Feedback)
	}
}

func TestScoreItemsInvalidInput(t *testing.T) {
	a := NewActivities(nil)
	cases := []struct {
		in   rewardapi.ScoreInput
		want []string
	}{
		{rewardapi.ScoreInput{Items: items(), Spec: verify.Spec{Verifiers: []verify.Component{{Name: "maths"}}}}, []string{`unknown verifier "maths"`, "allowed:", "code", "math"}},
		{rewardapi.ScoreInput{Rollouts: "x", Items: items(), Spec: mathFormatSpec()}, []string{"not both"}},
		{rewardapi.ScoreInput{Items: items(), Spec: mathFormatSpec(), Workers: -1}, []string{"workers=-1"}},
		{rewardapi.ScoreInput{Items: make([]rewardapi.Item, rewardapi.MaxItems+1), Spec: mathFormatSpec()}, []string{"at most"}},
		{rewardapi.ScoreInput{Items: items(), Spec: verify.Spec{Verifiers: []verify.Component{{Name: "code"}}}}, []string{"no sandbox on this worker"}},
	}
	for _, c := range cases {
		_, err := a.ScoreItems(context.Background(), c.in, nil)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: err = %v, want ErrInvalidInput", c.want, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not contain %q", err, w)
			}
		}
	}
}

func TestScoreItemsTimeoutPanicConcurrency(t *testing.T) {
	a := NewActivities(nil)
	var running, peak atomic.Int32
	slowRelease := make(chan struct{})
	defer close(slowRelease)
	reg := a.Registry()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(reg.Register("probe", func(json.RawMessage) (verify.Verifier, error) {
		return verify.Func(func(ctx context.Context, s verify.Sample) (verify.Verdict, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			switch s.Completion {
			case "slow": // ignores its context on purpose
				<-slowRelease
			case "panic":
				panic("boom")
			default:
				time.Sleep(20 * time.Millisecond)
			}
			return verify.Verdict{Score: 1, Pass: true}, nil
		}), nil
	}))
	var in []rewardapi.Item
	for _, c := range []string{"ok", "slow", "ok", "panic", "ok", "ok", "ok", "ok"} {
		in = append(in, rewardapi.Item{ID: c, Completion: c})
	}
	start := time.Now()
	out, err := a.ScoreItems(context.Background(), rewardapi.ScoreInput{Items: in, Workers: 2, ItemTimeout: config.Duration(200 * time.Millisecond),
		Spec: verify.Spec{Verifiers: []verify.Component{{Name: "probe"}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("took %v: the slow item should cost one timeout", el)
	}
	if out.Verdicts[1].Error != "timeout" || !strings.Contains(out.Verdicts[3].Error, "panicked: boom") {
		t.Errorf("verdicts %+v", out.Verdicts)
	}
	if out.Metrics.TimedOut != 1 || out.Metrics.Errors != 2 || out.Metrics.Judged != 6 || out.Metrics.MeanScore != 1 {
		t.Errorf("metrics %+v", out.Metrics)
	}
	// The slow verifier outlives its timeout (it ignores the context), so up to 3 may overlap.
	if p := peak.Load(); p > 3 {
		t.Errorf("peak concurrency %d with 2 workers", p)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.ScoreItems(ctx, rewardapi.ScoreInput{Items: in, Spec: verify.Spec{Verifiers: []verify.Component{{Name: "probe"}}}}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

func TestScoreActivity(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := s.NewTestActivityEnvironment()
	a := NewActivities(nil)
	env.RegisterActivityWithOptions(a.Score, activity.RegisterOptions{Name: rewardapi.ScoreName})
	val, err := env.ExecuteActivity(rewardapi.ScoreName, rewardapi.ScoreInput{Items: items(), Spec: mathFormatSpec()})
	if err != nil {
		t.Fatal(err)
	}
	var out rewardapi.ScoreOutput
	if err := val.Get(&out); err != nil {
		t.Fatal(err)
	}
	if len(out.Verdicts) != 5 || out.Verdicts[0].Score != 1 || out.Metrics.Judged != 4 || out.Verdicts[0].Partial["math"] != 1 {
		t.Errorf("output %+v", out)
	}
	_, err = env.ExecuteActivity(rewardapi.ScoreName, rewardapi.ScoreInput{Items: items(), Spec: verify.Spec{Verifiers: []verify.Component{{Name: "nope"}}}})
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || !appErr.NonRetryable() || appErr.Type() != "InvalidInput" {
		t.Errorf("bad spec: err = %v, want a non-retryable InvalidInput", err)
	}
}

func newSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	base, err := os.MkdirTemp("", "temper-reward-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	_ = os.Chmod(base, 0o711)
	sb, err := sandbox.New(sandbox.Config{BaseDir: filepath.Join(base, "sb"), GoCache: filepath.Join(os.TempDir(), "temper-sandbox-test-gocache")})
	if errors.Is(err, sandbox.ErrUnavailable) {
		t.Skipf("no sandbox: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if sb.Config().Python == "" {
		t.Skip("no python3")
	}
	return sb
}

func TestCodeVerifier(t *testing.T) {
	a := NewActivities(newSandbox(t))
	ref := json.RawMessage(`{"tests": [{"stdin": "2 3", "stdout": "5"}, {"stdin": "10 -4", "stdout": "6"}]}`)
	spec := verify.Spec{Verifiers: []verify.Component{{Name: "code", Params: json.RawMessage(`{"timeout": "2s"}`)}}}
	partial := verify.Spec{Verifiers: []verify.Component{{Name: "code", Params: json.RawMessage(`{"partial": true}`)}}}
	in := []rewardapi.Item{
		{ID: "right", Completion: "Here:\n```python\na, b = map(int, input().split())\nprint(a + b)\n```\n", Reference: ref},
		{ID: "wrong", Completion: "```python\nprint(5)\n```", Reference: ref},
		{ID: "crash", Completion: "```py\nraise ValueError('nope')\n```", Reference: ref},
		{ID: "loop", Completion: "```python\nwhile True: pass\n```", Reference: ref},
		{ID: "no-tests", Completion: "```python\nprint(1)\n```"},
	}
	out, err := a.ScoreItems(context.Background(), rewardapi.ScoreInput{Items: in, Spec: spec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	v := out.Verdicts
	if !v[0].Pass || v[0].Score != 1 {
		t.Errorf("right: %+v", v[0])
	}
	if v[1].Pass || v[1].Score != 0 || !strings.Contains(v[1].Feedback, "1 of 2 tests passed; test 2: wrong output") || strings.Contains(v[1].Feedback, "6") {
		t.Errorf("wrong: %+v", v[1])
	}
	if v[2].Pass || !strings.Contains(v[2].Feedback, "ValueError: nope") {
		t.Errorf("crash: %+v", v[2])
	}
	if v[3].Pass || !strings.Contains(v[3].Feedback, "timeout") {
		t.Errorf("loop: %+v", v[3])
	}
	if !strings.Contains(v[4].Error, "no tests") {
		t.Errorf("no tests: %+v", v[4])
	}
	if out.Metrics.SandboxMode == "" {
		t.Error("sandbox mode not reported")
	}
	t.Logf("sandbox mode %s", out.Metrics.SandboxMode)
	out, err = a.ScoreItems(context.Background(), rewardapi.ScoreInput{Items: in[1:2], Spec: partial}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Verdicts[0].Score != 0.5 || out.Verdicts[0].Partial["code/tests"] != 0.5 {
		t.Errorf("partial: %+v", out.Verdicts[0])
	}
	if _, err := a.ScoreItems(context.Background(), rewardapi.ScoreInput{Items: in[:1], Spec: verify.Spec{Verifiers: []verify.Component{{Name: "code", Params: json.RawMessage(`{"language": "rust"}`)}}}}, nil); err == nil || !strings.Contains(err.Error(), `language="rust": allowed values: python, go`) {
		t.Errorf("bad language: %v", err)
	}
}

func TestProgramExtraction(t *testing.T) {
	cases := []struct {
		completion string
		want       sandbox.Language
		src        string
		lang       sandbox.Language
	}{
		{"```go\npackage main\n```\n```python\nprint(1)\n```", "", "print(1)\n", sandbox.Python},
		{"```go\npackage main\n```\n```python\nprint(1)\n```", sandbox.Go, "package main\n", sandbox.Go},
		{"```\nprint(2)\n```", "", "print(2)\n", sandbox.Python},
		{"print(3)", "", "print(3)", sandbox.Python},
	}
	for _, c := range cases {
		src, lang := program(c.completion, c.want)
		if src != c.src || lang != c.lang {
			t.Errorf("program(%q, %q) = %q, %q", c.completion, c.want, src, lang)
		}
	}
}

// TestAestheticScoresRefusedLayoutsZero: the reward workers' "aesthetic" gives a layout the
// renderer refuses (a colour it does not know, a role it has no style for) the least score, 0,
// with the renderer's feedback, as one that is not a layout at all, though its geometry alone is
// perfect; "aesthetic/drawn" counts the refused ones (its mean is the share drawn).
func TestAestheticScoresRefusedLayoutsZero(t *testing.T) {
	a := NewActivities(nil)
	const column = `{"boxes":[{"id":"a","x":10,"y":10,"w":50,"h":20,"role":"%s","color":"%s"},{"id":"b","x":10,"y":34,"w":40,"h":20}]}`
	in := rewardapi.ScoreInput{Spec: verify.Spec{Verifiers: []verify.Component{{Name: "aesthetic", Weight: 1}}}, Items: []rewardapi.Item{
		{ID: "drawn", Completion: fmt.Sprintf(column, "title", "navy")},
		{ID: "unknown colour", Completion: fmt.Sprintf(column, "title", "chartreuse")},
		{ID: "unknown role", Completion: fmt.Sprintf(column, "heading", "navy")},
		{ID: "not a layout", Completion: "a poster with a title"},
	}}
	want := []struct {
		score, drawn float64
		feedback     string
	}{{1, 1, ""}, {0, 0, `color: "chartreuse"`}, {0, 0, `role: "heading": allowed values`}, {0, 0, "not valid JSON boxes"}}
	out, err := a.ScoreItems(context.Background(), in, func(rewardapi.Progress) {})
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		v := out.Verdicts[i]
		if v.Error != "" || v.Score != w.score || v.Partial["aesthetic/"+verify.AestheticDrawn] != w.drawn || !strings.Contains(v.Feedback, w.feedback) {
			t.Errorf("%s: %+v, want score %v drawn %v feedback with %q", v.ID, v, w.score, w.drawn, w.feedback)
		}
	}
	if m := out.Metrics; m.Judged != 4 || m.MeanScore != 0.25 || m.PassRate != 0.25 {
		t.Errorf("metrics %+v: want 4 judged, mean score and pass rate 0.25", m)
	}
}
