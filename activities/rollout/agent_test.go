package rollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/rollout/agenttest"
	"github.com/temperml/temper/activities/rollout/gateway"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
)

// scriptedLogit is the logit of the scripted token (every other token's is 0): greedy decoding
// writes the script, and each token's log-probability is scriptedLogProb.
const scriptedLogit = 8

var scriptedLogProb = float32(float64(scriptedLogit) - math.Log(math.Exp(scriptedLogit)+float64(tokenize.ByteVocabSize-1)))

// bigmulScript is a policy that has learnt bigmul's tool use: asked "a*b=", it calls calc on
// a*b; after the tool's result it copies the result and ends its turn.
func bigmulScript(ctx string) string {
	if i := strings.LastIndex(ctx, "\n<|tool|>\n"); i >= 0 {
		res, _, _ := strings.Cut(ctx[i+len("\n<|tool|>\n"):], "\n")
		return res + "\x00" // \x00 stands for EOS
	}
	i := strings.LastIndex(ctx, "<|user|>\n")
	q, _, _ := strings.Cut(ctx[i+len("<|user|>\n"):], "\n")
	return `<tool>{"name":"calc","arguments":{"expr":"` + strings.TrimSuffix(q, "=") + `"}}</tool>`
}

// scriptedDecoder is a continuous batch of a model that writes script(context) token by token
// (gateway.Decoder); its logits put scriptedLogit on the scripted token.
type scriptedDecoder struct {
	script func(ctx string) string
	rows   map[int][]int // id → prompt and tokens so far
	gen    map[int]int   // id → where its prompt ends
	next   int
	closed *int
}

func (d *scriptedDecoder) logits(id int) []float32 {
	toks := d.rows[id]
	prompt := tokenize.Byte{}.Decode(toks[:d.gen[id]])
	target := []byte(d.script(prompt))
	lg := make([]float32, tokenize.ByteVocabSize)
	n := len(toks) - d.gen[id]
	t := tokenize.ByteEOS
	if n < len(target) && target[n] != 0 {
		t = int(target[n])
	}
	lg[t] = scriptedLogit
	return lg
}

func (d *scriptedDecoder) Join(prompts [][]int) ([]int, []float32, error) {
	var ids []int
	var out []float32
	for _, p := range prompts {
		d.next++
		d.rows[d.next], d.gen[d.next] = slices.Clone(p), len(p)
		ids = append(ids, d.next)
		out = append(out, d.logits(d.next)...)
	}
	return ids, out, nil
}

func (d *scriptedDecoder) Step(ids, tokens []int) ([]float32, error) {
	var out []float32
	for i, id := range ids {
		d.rows[id] = append(d.rows[id], tokens[i])
		out = append(out, d.logits(id)...)
	}
	return out, nil
}

func (d *scriptedDecoder) Leave(id int) error {
	delete(d.rows, id)
	return nil
}

func (d *scriptedDecoder) Close() { *d.closed++ }

// scriptedEngine is a policy engine whose only use here is making decoders.
type scriptedEngine struct {
	train.Engine
	mu     sync.Mutex
	made   int
	closed int
}

func (e *scriptedEngine) NewDecoder() (gateway.Decoder, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.made++
	return &scriptedDecoder{script: bigmulScript, rows: map[int][]int{}, gen: map[int]int{}, closed: &e.closed}, nil
}

// agentFixture is a sandbox, and an agent directory holding the Python example agent and wrapper.py
// (testdata/dying_agent.py), which runs it in a child process that kills itself with SIGKILL after
// its first model call on the first attempt of episodes whose id matches FAIL_FIRST, and on every
// attempt of those matching FAIL_ALWAYS.
func agentFixture(t *testing.T) (*sandbox.Sandbox, string) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("agent episodes run in the isolated sandbox: Linux, as root")
	}
	base, err := os.MkdirTemp("", "temper-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	sb, err := sandbox.New(sandbox.Config{BaseDir: filepath.Join(base, "sb"), Slots: 2})
	if errors.Is(err, sandbox.ErrUnavailable) {
		t.Skipf("no sandbox: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	if sb.Mode() != sandbox.ModeIsolated || sb.Config().Python == "" {
		t.Skipf("agent episodes need the isolated sandbox with python (%s %s)", sb.Mode(), sb.ModeReason())
	}
	dir := filepath.Join(base, "agent")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../scripts/agents/python/agent.py")
	if err != nil {
		t.Fatal(err)
	}
	wrapper, err := os.ReadFile("testdata/dying_agent.py")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"agent.py": src, "wrapper.py": wrapper} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sb, dir
}

// TestAgentEpisodes plays bigmul episodes with the Python example agent in the sandbox against a
// scripted policy behind the gateway: each episode is one trajectory whose policy tokens and
// log-probabilities are exactly what the server returned to the agent (and its final stop token),
// whose only other tokens are the tool message the agent sent (masked), and whose completion is the
// agent's answer. An agent killed mid-episode is retried in a fresh sandbox; a group one of whose
// episodes fails past its retries is dropped whole and counted.
func TestAgentEpisodes(t *testing.T) {
	sb, dir := agentFixture(t)
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	products := []string{"48213*9071=", "1234*56789="}
	var rs []rollout.Rollout
	var seeds []uint64
	for g, p := range products {
		for k := range 2 {
			rs = append(rs, rollout.Rollout{ID: fmt.Sprintf("p%d-%d", g, k), Group: g, Task: "bigmul", Prompt: p, Answer: product(p)})
			seeds = append(seeds, uint64(100*g+k))
		}
	}
	run := func(t *testing.T, env map[string]string) (kept []rollout.Rollout, dropped, failures int, eng *scriptedEngine) {
		t.Helper()
		eng = &scriptedEngine{}
		a := &Activities{Sandbox: func() *sandbox.Sandbox { return sb }}
		in := rolloutapi.GenerateInput{Run: "r", Phase: "grpo", PolicyVersion: 4, MaxNewTokens: 64, Temperature: 0,
			Agent: &rolloutapi.AgentSpec{Command: []string{"python3", "wrapper.py"}, Dir: dir, Env: env, Retries: 1}}
		var beats int
		kept, _, dropped, failures, err := a.runAgents(context.Background(), &sharedEngine{loadedEngine: loadedEngine{eng: eng, cfg: cfg}}, in, slices.Clone(rs), seeds,
			func(int) { beats++ })
		if err != nil {
			t.Fatal(err)
		}
		if beats != len(rs) {
			t.Errorf("%d progress reports for %d episodes", beats, len(rs))
		}
		if eng.made != eng.closed {
			t.Errorf("%d decoders made, %d closed", eng.made, eng.closed)
		}
		return kept, dropped, failures, eng
	}
	t.Run("episodes", func(t *testing.T) {
		kept, dropped, failures, _ := run(t, map[string]string{"TEMPER_AGENT_LOG": "-"})
		if len(kept) != len(rs) || dropped != 0 || failures != 0 {
			t.Fatalf("kept %d of %d, dropped %d groups, %d failures", len(kept), len(rs), dropped, failures)
		}
		for _, r := range kept {
			checkAgentRollout(t, r, 1)
		}
	})
	t.Run("killed agent retried", func(t *testing.T) {
		kept, dropped, failures, eng := run(t, map[string]string{"TEMPER_AGENT_LOG": "-", "FAIL_FIRST": "."})
		if len(kept) != len(rs) || dropped != 0 || failures != len(rs) || eng.made != 2*len(rs) {
			t.Fatalf("kept %d of %d, dropped %d groups, %d failures, %d endpoints: want every episode's first attempt killed and retried",
				len(kept), len(rs), dropped, failures, eng.made)
		}
		for _, r := range kept {
			checkAgentRollout(t, r, 2)
		}
	})
	t.Run("group dropped", func(t *testing.T) {
		kept, dropped, failures, _ := run(t, map[string]string{"TEMPER_AGENT_LOG": "-", "FAIL_ALWAYS": "^p1-0$"})
		if dropped != 1 || failures != 2 || len(kept) != 2 || kept[0].Group != 0 || kept[1].Group != 0 {
			t.Fatalf("kept %d (%v), dropped %d groups, %d failures: want group 1 dropped whole after 2 attempts of its episode p1-0",
				len(kept), kept, dropped, failures)
		}
	})
}

// checkAgentRollout checks one bigmul episode of an example agent (TEMPER_AGENT_LOG=-) against the
// scripted policy: one segment of two calls whose policy tokens and log-probabilities are what the
// server returned to the agent, and whose only other tokens are the tool message.
func checkAgentRollout(t *testing.T, r rollout.Rollout, attempts int) {
	t.Helper()
	answer, log, _ := strings.Cut(r.Completion, "\n")
	if answer != r.Answer || r.PolicyVersion != 4 || len(r.Segments) != 0 || r.Ep == nil || r.Ep.Calls != 2 || r.Ep.Attempts != attempts {
		t.Fatalf("%s: answer %q (want %s), version %d, %d extra segments, episode %+v", r.ID, answer, r.Answer, r.PolicyVersion, len(r.Segments), r.Ep)
	}
	var bt tokenize.Byte
	wantPrompt, _ := tokenize.DefaultChat().Prompt(bt, []tokenize.Message{{Role: tokenize.RoleUser, Content: r.Prompt}})
	if !slices.Equal(r.PromptTokens, wantPrompt) {
		t.Errorf("%s: prompt %q, want the chat template's %q", r.ID, bt.Decode(r.PromptTokens), bt.Decode(wantPrompt))
	}
	// What the server returned to the agent, call by call: the policy's runs of tokens.
	var served [][]int
	var servedLP [][]float32
	resps, err := agenttest.Responses(log)
	if err != nil {
		t.Fatalf("%s: %v", r.ID, err)
	}
	for _, resp := range resps {
		var ids []int
		var lps []float32
		for _, c := range resp.Choices[0].Logprobs.Content {
			if len(c.Bytes) != 1 {
				t.Fatalf("%s: a byte-level token of %d bytes", r.ID, len(c.Bytes))
			}
			ids, lps = append(ids, c.Bytes[0]), append(lps, c.Logprob)
		}
		served, servedLP = append(served, ids), append(servedLP, lps)
	}
	var runs [][]int
	var runLP [][]float32
	var env []int
	for i, tok := range r.Tokens {
		switch {
		case !r.Policy[i]:
			env = append(env, tok)
			if r.LogProbs[i] != 0 {
				t.Errorf("%s: token %d is the agent's but has log-prob %v", r.ID, i, r.LogProbs[i])
			}
		case i == 0 || !r.Policy[i-1]:
			runs, runLP = append(runs, []int{tok}), append(runLP, []float32{r.LogProbs[i]})
		default:
			runs[len(runs)-1] = append(runs[len(runs)-1], tok)
			runLP[len(runLP)-1] = append(runLP[len(runLP)-1], r.LogProbs[i])
		}
	}
	if len(runs) != 2 || len(served) != 2 {
		t.Fatalf("%s: %d policy runs, %d responses: want 2 calls", r.ID, len(runs), len(served))
	}
	// The server's log-probs cover the stop string that ended the call (its text does not);
	// the answer's EOS stop token ends the choice without being part of its text or log-probs.
	if !strings.HasSuffix(bt.Decode(served[0]), "</tool>") {
		t.Errorf("%s: the first call's tokens %q do not end with the stop string", r.ID, bt.Decode(served[0]))
	}
	want := [][]int{served[0], append(slices.Clone(served[1]), tokenize.ByteEOS)}
	for c := range runs {
		if !slices.Equal(runs[c], want[c]) {
			t.Errorf("%s call %d: trained on %q, served %q", r.ID, c, bt.Decode(runs[c]), bt.Decode(want[c]))
		}
		for j, lp := range runLP[c] {
			if j < len(servedLP[c]) && lp != servedLP[c][j] {
				t.Errorf("%s call %d token %d: trained log-prob %v, served %v", r.ID, c, j, lp, servedLP[c][j])
			}
			if lp != scriptedLogProb {
				t.Errorf("%s call %d token %d: log-prob %v, the model's is %v", r.ID, c, j, lp, scriptedLogProb)
			}
		}
	}
	if got, want := bt.Decode(env), "\n<|tool|>\n"+r.Answer+"\n<|assistant|>\n"; got != want {
		t.Errorf("%s: masked tokens %q, want only the tool message %q", r.ID, got, want)
	}
}

// product is a*b for a prompt "a*b=".
func product(p string) string {
	a, b, _ := strings.Cut(strings.TrimSuffix(p, "="), "*")
	x, _ := new(big.Int).SetString(a, 10)
	y, _ := new(big.Int).SetString(b, 10)
	return new(big.Int).Mul(x, y).String()
}

// TestAgentEpisodesNode is TestAgentEpisodes' first case with the Node example agent (the official
// openai npm client): TEMPER_NODE_TEST=1 go test -run TestAgentEpisodesNode ./activities/rollout/
// (it runs npm ci in scripts/agents/node the first time).
func TestAgentEpisodesNode(t *testing.T) {
	if os.Getenv("TEMPER_NODE_TEST") != "1" {
		t.Skip("set TEMPER_NODE_TEST=1 to run the Node example agent (needs node and npm)")
	}
	sb, _ := agentFixture(t)
	dir, err := filepath.Abs("../../scripts/agents/node")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	var rs []rollout.Rollout
	for g, p := range []string{"48213*9071=", "1234*56789="} {
		rs = append(rs, rollout.Rollout{ID: fmt.Sprintf("p%d-0", g), Group: g, Task: "bigmul", Prompt: p, Answer: product(p)})
	}
	a := &Activities{Sandbox: func() *sandbox.Sandbox { return sb }}
	in := rolloutapi.GenerateInput{Run: "r", Phase: "grpo", PolicyVersion: 4, MaxNewTokens: 64, Temperature: 0,
		Agent: &rolloutapi.AgentSpec{Command: []string{"node", "agent.mjs"}, Dir: dir, AddressSpaceGiB: 32, Env: map[string]string{"TEMPER_AGENT_LOG": "-"}}}
	kept, _, dropped, failures, err := a.runAgents(context.Background(), &sharedEngine{loadedEngine: loadedEngine{eng: &scriptedEngine{}, cfg: cfg}}, in, rs, []uint64{1, 2}, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != len(rs) || dropped != 0 || failures != 0 {
		t.Fatalf("kept %d of %d, dropped %d groups, %d failures", len(kept), len(rs), dropped, failures)
	}
	for _, r := range kept {
		checkAgentRollout(t, r, 1)
	}
}
