package rollout

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
)

// versionEngine samples from its request's seed and prompt alone (a stand-in for a policy
// version): token t of a request is a function of (seed, len(prompt)+t), sometimes the stop token,
// and every log-prob is lp, so a token's log-prob names the engine that sampled it.
type versionEngine struct {
	train.Engine
	lp float32
}

func (e versionEngine) Generate(prompts [][]int, o sample.Options) ([]model.Completion, error) {
	out := make([]model.Completion, len(prompts))
	for i, p := range prompts {
		c := &out[i]
		for t := 0; t < o.MaxNewTokens; t++ {
			h := o.SeedFor(i)*0x9e3779b97f4a7c15 ^ uint64(len(p)+t)*0xbf58476d1ce4e5b9
			h ^= h >> 29
			tok := 'a' + int(h%20)
			if h%7 == 0 {
				tok = tokenize.ByteEOS
			}
			c.Tokens, c.LogProbs = append(c.Tokens, tok), append(c.LogProbs, e.lp)
			if tok == tokenize.ByteEOS {
				c.StopReason = sample.StopToken
				break
			}
		}
		if c.StopReason == "" {
			c.StopReason = sample.StopLength
		}
	}
	return out, nil
}

// segmentRun generates one iteration in segments of 2, 2, then the rest, under versions 1, 2, 3,
// as shards of the given prompt ranges, and returns each segment's objects concatenated.
func segmentRun(t *testing.T, ranges [][2]int) (segs [][]byte, outs [][]rolloutapi.GenerateOutput) {
	t.Helper()
	dir := t.TempDir()
	a := &Activities{Ckpt: ckpt.New(ckpt.Options{})}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a.Generate)
	prev := make([]string, len(ranges))
	for seg, budget := range []int{2, 2, 0} {
		version := seg + 1
		var all []byte
		var round []rolloutapi.GenerateOutput
		for s, r := range ranges {
			ckptURI := fmt.Sprintf("mem://policy/v%d", version)
			a.engines.cur = &sharedEngine{uri: ckptURI, loadedEngine: loadedEngine{eng: versionEngine{lp: -float32(version)}, maxSeq: 64, enc: train.Encoder(), stops: []int{tokenize.ByteEOS}}}
			in := rolloutapi.GenerateInput{Store: "file://" + dir, Run: "run", Phase: "grpo", Checkpoint: ckptURI, PolicyVersion: version, Iteration: 3,
				Data: trainapi.DataSpec{Task: "add2", TrainExamples: 1, HeldoutExamples: 16}, Seed: 7, Prompts: 8, Group: 4, MaxNewTokens: 7,
				Temperature: 1, PromptLo: r[0], PromptHi: r[1], SegmentTokens: budget, Continue: prev[s], Tag: fmt.Sprintf("%s-g%02d", rolloutapi.ShardTag(s), seg)}
			var out rolloutapi.GenerateOutput
			v, err := env.ExecuteActivity(a.Generate, in)
			if err == nil {
				err = v.Get(&out)
			}
			if err != nil {
				t.Fatalf("segment %d shard %d: %v", seg, s, err)
			}
			b, err := os.ReadFile(strings.TrimPrefix(out.Rollouts, "file://"))
			if err != nil {
				t.Fatal(err)
			}
			all, prev[s], round = append(all, b...), out.Rollouts, append(round, out)
		}
		segs, outs = append(segs, all), append(outs, round)
	}
	return segs, outs
}

// TestPartialSegments: a generation cut into segments under three versions continues each unfinished row
// where it stopped, tags every token with the version that sampled it (its log-prob is that
// version's), leaves finished rows alone, ends with every row finished, and writes the same bytes
// whatever the number of shards.
func TestPartialSegments(t *testing.T) {
	segs, outs := segmentRun(t, [][2]int{{0, 8}})
	sharded, _ := segmentRun(t, rolloutapi.ShardRanges(8, 4, 2))
	for i := range segs {
		if !bytes.Equal(segs[i], sharded[i]) {
			t.Fatalf("segment %d: two shards wrote\n%s\none shard\n%s", i, sharded[i], segs[i])
		}
	}
	var rows [][]rollout.Rollout
	for i, b := range segs {
		rs, err := rollout.Read(bytes.NewReader(b), fmt.Sprint("segment ", i))
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, rs)
	}
	unfinished := []int{0, 0, 0}
	for i, rs := range rows {
		for _, r := range rs {
			if r.StopReason == rollout.StopPartial {
				unfinished[i]++
			}
		}
		if outs[i][0].Unfinished != unfinished[i] {
			t.Errorf("segment %d reports %d unfinished, its object holds %d", i, outs[i][0].Unfinished, unfinished[i])
		}
	}
	if unfinished[0] == 0 || unfinished[1] == 0 || unfinished[2] != 0 || unfinished[1] >= unfinished[0] {
		t.Fatalf("unfinished rows per segment %v: want some after the first two, none after the last", unfinished)
	}
	spans := 0
	for j, r := range rows[2] {
		if len(r.Versions) != len(r.Tokens) || r.PolicyVersion != 1 {
			t.Fatalf("row %s: %d versions for %d tokens, policy_version %d", r.ID, len(r.Versions), len(r.Tokens), r.PolicyVersion)
		}
		for i, v := range r.Versions {
			if want := min(3, 1+i/2); v != want || r.LogProbs[i] != -float32(v) {
				t.Fatalf("row %s token %d: version %d, log-prob %g; want version %d and its log-prob", r.ID, i, v, r.LogProbs[i], want)
			}
		}
		if r.StopReason == rollout.StopPartial || (r.StopReason == string(sample.StopLength)) != (len(r.Tokens) == 7) {
			t.Fatalf("row %s ends %q with %d tokens", r.ID, r.StopReason, len(r.Tokens))
		}
		if first := rows[0][j]; first.StopReason != rollout.StopPartial && !equalRows(first, r) {
			t.Fatalf("row %s finished in the first segment, changed after: %+v -> %+v", r.ID, first, r)
		}
		if r.Versions[len(r.Versions)-1] == 3 {
			spans++
		}
	}
	if spans == 0 {
		t.Fatal("no row reached the third version: the test says nothing about continuation")
	}
}

func equalRows(a, b rollout.Rollout) bool {
	var x, y bytes.Buffer
	_ = rollout.Write(&x, []rollout.Rollout{a})
	_ = rollout.Write(&y, []rollout.Rollout{b})
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// TestSegmentRefusals: what segments do not support is refused by name.
func TestSegmentRefusals(t *testing.T) {
	for _, c := range []struct {
		in   rolloutapi.GenerateInput
		want string
	}{
		{rolloutapi.GenerateInput{SegmentTokens: -1, Continue: "x"}, "segment_tokens -1"},
		{rolloutapi.GenerateInput{SegmentTokens: 2, Tools: []string{"calc"}}, "segments with tools"},
		{rolloutapi.GenerateInput{SegmentTokens: 2, Retry: []rollout.Rollout{{}}}, "self-correction retries"},
	} {
		if err := checkSegment(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %q", c.in, err, c.want)
		}
	}
}
