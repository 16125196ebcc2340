package train_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/workers/traintest"
)

// TestBitIdentityFingerprint trains a few steps of every kind (SFT and LoRA, the DPO family and KTO,
// the reward model and its critic verifier, distillation, GRPO in memory, streamed and from shards,
// the other group algorithms, episode masks, PPO with its critic) from fixed seeds and writes every
// checkpoint file's sha256 and every non-timing metric to the file named by TEMPER_BITIDENT. Run on
// two trees on the same machine and diff the files: a refactoring that must not change numerics
// leaves them equal. Seeded float results differ between machines of different vector ISAs, so the
// fingerprint is compared, never committed:
//
//	TEMPER_BITIDENT=/tmp/after.txt go test -count=1 -run TestBitIdentityFingerprint ./activities/train/
func TestBitIdentityFingerprint(t *testing.T) {
	out := os.Getenv("TEMPER_BITIDENT")
	if out == "" {
		t.Skip("set TEMPER_BITIDENT=FILE to write the fingerprint")
	}
	f := &fingerprint{t: t}
	e := traintest.New(t)
	tiny := modelcfg.Config(traintest.TinyModel(t))
	optim := contract.Optim{LR: 3e-3, WarmupSteps: 1, MinLRRatio: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}
	head := func(phase, from string, steps int) contract.ChunkHead {
		return contract.ChunkHead{Store: e.Store, Run: "b", Phase: phase, From: from, Steps: steps, TotalSteps: steps,
			Cursor: contract.Cursor{Seed: 7}, Optim: optim, FreshOptimizer: true}
	}
	var base, other contract.InitOutput
	e.Must(contract.InitName, contract.InitInput{Store: e.Store, Run: "b", Phase: "init", Model: tiny, Seed: 11}, &base)
	e.Must(contract.InitName, contract.InitInput{Store: e.Store, Run: "b", Phase: "other", Model: tiny, Seed: 12}, &other)
	f.ckpt("init", base.Checkpoint)

	// SFT, full and LoRA.
	data := contract.DataSpec{Task: "add2", TrainExamples: 64, HeldoutExamples: 8}
	var sft, lora contract.ChunkOutput
	e.Must(contract.ChunkName, contract.ChunkInput{ChunkHead: head("sft", base.Checkpoint, 3), Data: data, Batch: contract.BatchSpec{Rows: 4, Seq: 32}}, &sft)
	f.chunk("sft", sft)
	e.Must(contract.ChunkName, contract.ChunkInput{ChunkHead: head("lora", sft.Checkpoint, 3), Data: data, Batch: contract.BatchSpec{Rows: 4, Seq: 32},
		LoRA: &modelcfg.LoRA{Rank: 4, Seed: 3}}, &lora)
	f.chunk("lora", lora)

	// Preference kinds: reference on the fly, precomputed, none.
	pdata := contract.PrefDataSpec{Task: "add2", TrainExamples: 24, HeldoutExamples: 8}
	for _, c := range []struct{ kind, mode string }{{loss.PrefDPO, "fly"}, {loss.PrefIPO, "pre"}, {loss.PrefORPO, ""}, {loss.PrefSimPO, ""},
		{loss.PrefKTO, "fly"}, {loss.PrefKTO, "pre"}} {
		name := "pref-" + c.kind + "-" + c.mode
		in := contract.PrefChunkInput{ChunkHead: head(name, sft.Checkpoint, 2), Data: pdata, Batch: contract.BatchSpec{Rows: 4, Seq: 16},
			Loss: loss.DefaultPreference(c.kind)}
		switch c.mode {
		case "fly":
			in.Reference = base.Checkpoint
		case "pre":
			var ro contract.RefLogProbsOutput
			e.Must(contract.RefLogProbsName, contract.RefLogProbsInput{Store: e.Store, Run: "b", Phase: name, Reference: base.Checkpoint,
				Data: pdata, Kind: c.kind, Seq: 16, Seed: 7}, &ro)
			in.RefData = ro.RefData
		}
		var out contract.ChunkOutput
		e.Must(contract.PrefChunkName, in, &out)
		f.chunk(name, out)
	}
	var pev contract.EvalOutput
	e.Must(contract.PrefEvaluateName, contract.PrefEvalInput{Store: e.Store, Checkpoint: sft.Checkpoint, Reference: base.Checkpoint, Data: pdata,
		Loss: loss.DefaultPreference(loss.PrefDPO), KLTokens: 4, Seed: 7}, &pev)
	f.metrics("pref-eval", pev.Metrics)

	// Reward model (generative term, LM term), its evaluation and the critic verifier.
	var rinit contract.RewardInitOutput
	e.Must(contract.RewardInitName, contract.RewardInitInput{Store: e.Store, Run: "b", Phase: "rm", From: sft.Checkpoint, Seed: 9, LogProb: true}, &rinit)
	f.ckpt("rm-init", rinit.Checkpoint)
	bt := objective.DefaultBT()
	bt.LMCoef = 0.1
	rdata := contract.RewardData{Task: "add2", TrainPairs: 32, HeldoutPairs: 8}
	var rm contract.ChunkOutput
	e.Must(contract.RewardChunkName, contract.RewardChunkInput{ChunkHead: head("rm", rinit.Checkpoint, 2), Data: rdata,
		Batch: contract.RewardBatch{Rows: 4, MaxSeq: 32}, Loss: bt}, &rm)
	f.chunk("rm", rm)
	var rev contract.RewardEvalOutput
	e.Must(contract.RewardEvaluateName, contract.RewardEvalInput{Store: e.Store, Checkpoint: rm.Checkpoint, Data: rdata, Loss: bt, Seed: 7}, &rev)
	f.metrics("rm-eval", rev.Metrics)
	crit, err := reward.NewCriticFactory(ckpt.New(ckpt.Options{}), traintest.NewEngine)(json.RawMessage(fmt.Sprintf(`{"checkpoint":%q}`, rm.Checkpoint)))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []verify.Sample{{Prompt: "1+2=", Completion: "3"}, {Prompt: "4+4=", Completion: "9"}, {Completion: "17"}} {
		v, err := crit.Verify(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		f.line("critic-%d score %v pass %v", i, v.Score, v.Pass)
	}

	// Distillation: full logits, top-k on the fly, precomputed top-k, on-policy JSD.
	top := objectivecfg.DefaultDistill()
	top.TopK, top.Temperature = 4, 2
	var tg contract.DistillTargetsOutput
	e.Must(contract.DistillTargetsName, contract.DistillTargetsInput{Store: e.Store, Run: "b", Phase: "distill-pre", Teacher: other.Checkpoint,
		Data: data, Seq: 24, TopK: 4, Temperature: 2, Seed: 7}, &tg)
	gkd := objectivecfg.DefaultDistill()
	gkd.Divergence, gkd.Beta, gkd.Lambda, gkd.SampleTokens = objectivecfg.DivJSD, 0.5, 0.5, 4
	for _, c := range []struct {
		name             string
		cfg              objectivecfg.DistillConfig
		teacher, targets string
	}{{"distill-full", objectivecfg.DefaultDistill(), other.Checkpoint, ""}, {"distill-topk", top, other.Checkpoint, ""},
		{"distill-pre", top, "", tg.Targets}, {"distill-gkd", gkd, other.Checkpoint, ""}} {
		var out contract.ChunkOutput
		e.Must(contract.DistillChunkName, contract.DistillChunkInput{ChunkHead: head(c.name, sft.Checkpoint, 2), Data: data,
			Batch: contract.BatchSpec{Rows: 4, Seq: 24}, Loss: c.cfg, Teacher: c.teacher, Targets: c.targets}, &out)
		f.chunk(c.name, out)
	}

	// Policy steps.
	dir := t.TempDir()
	uri, rewards, rs := bitRollouts(t, sft.Checkpoint, dir, "plain", 24, false)
	shards := bitShards(t, dir, rs, rewards, [][2]int{{0, 8}, {8, 12}, {12, 24}})
	epURI, epRewards, _ := bitRollouts(t, sft.Checkpoint, dir, "episodes", 16, true)
	grpo := loss.DefaultPolicyConfig(loss.AlgoGRPO)
	grpo.KLBeta = 0
	kl := loss.DefaultPolicyConfig(loss.AlgoGRPO)
	kl.KLBeta, kl.TISThreshold = 0.05, 2
	step := func(name string, in contract.PolicyStepInput) contract.PolicyStepOutput {
		t.Helper()
		in.Store, in.Run, in.Phase, in.LR = e.Store, "b", name, 3e-3
		if in.Policy == "" {
			in.Policy = sft.Checkpoint
		}
		in.Optim = optim
		var out contract.PolicyStepOutput
		e.Must(contract.PolicyStepName, in, &out)
		f.policy(name, out)
		return out
	}
	step("grpo-onpolicy", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: grpo, Epochs: 1, FreshOptimizer: true})
	step("grpo-kl-mb", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: kl, Reference: base.Checkpoint, Epochs: 2, Minibatch: 8,
		DynamicSampling: true, FreshOptimizer: true})
	step("grpo-kl-stream", contract.PolicyStepInput{Shards: shards, Loss: kl, Reference: base.Checkpoint, Epochs: 2, Minibatch: 8,
		DynamicSampling: true, FreshOptimizer: true})
	step("grpo-shards-mem", contract.PolicyStepInput{Shards: shards, Loss: kl, Reference: base.Checkpoint, Epochs: 1, FreshOptimizer: true})
	step("grpo-selfref", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: kl, Reference: sft.Checkpoint, Epochs: 1, FreshOptimizer: true})
	for _, algo := range []string{loss.AlgoDrGRPO, loss.AlgoRLOO, loss.AlgoReinforcePP, loss.AlgoDAPO, loss.AlgoGSPO} {
		lc := loss.DefaultPolicyConfig(algo)
		step("algo-"+algo, contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: lc, Reference: base.Checkpoint, Epochs: 2, Minibatch: 12, FreshOptimizer: true})
	}
	step("episodes", contract.PolicyStepInput{Rollouts: epURI, Rewards: epRewards, Loss: grpo, Epochs: 1, Minibatch: 8, FreshOptimizer: true})
	step("nan", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: grpo, Epochs: 1, InjectNaN: true, FreshOptimizer: true})
	step("from-lora", contract.PolicyStepInput{Policy: lora.Checkpoint, Rollouts: uri, Rewards: rewards, Loss: grpo, Epochs: 1, FreshOptimizer: true})
	v1 := step("grpo-v1", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: kl, Reference: base.Checkpoint, Epochs: 1, Minibatch: 12, FreshOptimizer: true})
	step("grpo-v2", contract.PolicyStepInput{Policy: v1.Checkpoint, Version: 1, Rollouts: uri, Rewards: rewards, Loss: kl, Reference: base.Checkpoint, Epochs: 1, Minibatch: 12})
	ppo := loss.DefaultPolicyConfig(loss.AlgoPPO)
	ppo.KLBeta = 0.02
	pc := contract.PPOConfig{Gamma: 1, Lambda: 0.9, KLCoef: 0.05, Seed: 5}
	p1 := step("ppo-v1", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: ppo, Reference: base.Checkpoint, Epochs: 2, Minibatch: 8, PPO: &pc, FreshOptimizer: true})
	step("ppo-v2", contract.PolicyStepInput{Policy: p1.Checkpoint, Version: 1, Rollouts: uri, Rewards: rewards, Loss: ppo, Reference: base.Checkpoint, Epochs: 1, PPO: &pc})
	step("ppo-shards", contract.PolicyStepInput{Shards: shards, Loss: ppo, Epochs: 1, Minibatch: 12, FreshOptimizer: true})
	var plainRM contract.RewardInitOutput
	e.Must(contract.RewardInitName, contract.RewardInitInput{Store: e.Store, Run: "b", Phase: "rm-plain", From: sft.Checkpoint, Seed: 9}, &plainRM)
	step("ppo-rm", contract.PolicyStepInput{Policy: plainRM.Checkpoint, Rollouts: uri, Rewards: rewards, Loss: ppo, Epochs: 1, FreshOptimizer: true})
	step("ppo-nan", contract.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: ppo, Epochs: 1, InjectNaN: true, FreshOptimizer: true})

	if err := os.WriteFile(out, []byte(strings.Join(f.lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lines written to %s", len(f.lines), out)
}

type fingerprint struct {
	t     *testing.T
	lines []string
}

func (f *fingerprint) line(format string, args ...any) {
	f.lines = append(f.lines, fmt.Sprintf(format, args...))
}

// ckpt records the sha256 of every file of a checkpoint but state.json (it holds timings; its
// scalars are recorded without them) and adapter_config.json (it names its base by URI, in the
// test's temporary directory).
func (f *fingerprint) ckpt(name, uri string) {
	f.t.Helper()
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), uri)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, file := range ck.Manifest.Files {
		if file.Name != "state.json" && file.Name != "adapter_config.json" {
			f.line("%s %s %s", name, file.Name, file.SHA256)
		}
	}
	st, err := ck.ReadState(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	f.line("%s state step %d version %d cursor %+v config %s", name, st.Step, st.PolicyVersion, st.Cursor, st.ConfigHash)
	f.metrics(name+" state", st.Scalars)
}

// metrics records every metric but wall times and rates, exactly (%v of a float64 round-trips).
func (f *fingerprint) metrics(name string, m map[string]float64) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !strings.HasPrefix(k, "seconds") && !strings.HasPrefix(k, "metric/seconds") && !strings.HasSuffix(k, "_per_s") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		f.line("%s %s=%v", name, k, m[k])
	}
}

func (f *fingerprint) chunk(name string, out contract.ChunkOutput) {
	f.line("%s step %d cursor %+v loss %v last %v norm %v lr %v nonfinite %d", name, out.Step, out.Cursor, out.Loss, out.LastLoss, out.GradNorm, out.LR, out.NonFinite)
	f.metrics(name, out.Metrics)
	f.ckpt(name, out.Checkpoint)
}

func (f *fingerprint) policy(name string, out contract.PolicyStepOutput) {
	f.line("%s version %d nonfinite %v", name, out.Version, out.NonFinite)
	f.metrics(name, out.Metrics)
	f.ckpt(name, out.Checkpoint)
}

// bitRollouts samples n completions of up to 6 tokens for n/4 prompts (groups of 4) from the policy
// and scores them on "the first byte is even"; with episodes, every other completion's third token is
// a tool result (not the policy's) and the rollouts carry episode summaries.
func bitRollouts(t *testing.T, policy, dir, name string, n int, episodes bool) (string, []float64, []rollout.Rollout) {
	t.Helper()
	m, err := train.Loader{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: traintest.NewEngine}.Load(context.Background(), policy, train.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	eng := m.Engine
	prompts := make([][]int, n)
	for i := range prompts {
		prompts[i] = []int{tokenize.ByteBOS, 'a' + i/4, '+', '1' + i/4%9, '='}
	}
	cs, err := eng.Generate(prompts, sample.Options{MaxNewTokens: 6, Temperature: 1, Seed: 1234, StopTokens: []int{tokenize.ByteEOS}})
	if err != nil {
		t.Fatal(err)
	}
	rs := make([]rollout.Rollout, n)
	rewards := make([]float64, n)
	for i, c := range cs {
		rs[i] = rollout.Rollout{ID: fmt.Sprintf("%s%d", name, i), Group: i / 4, PromptTokens: prompts[i], Tokens: c.Tokens, LogProbs: c.LogProbs}
		if len(c.Tokens) > 0 && c.Tokens[0]%2 == 0 {
			rewards[i] = 1
		}
		if i%3 == 0 {
			rewards[i] += 0.25
		}
		if episodes {
			rs[i].Ep = &rollout.Episode{Turns: 1 + i%2, ToolCalls: i % 2, End: "answer", Checked: i%4 == 0, CheckPass: i%8 == 0}
			if i%2 == 1 && len(c.Tokens) > 3 {
				rs[i].Policy = make([]bool, len(c.Tokens))
				for k := range rs[i].Policy {
					rs[i].Policy[k] = k != 2
				}
			}
		}
	}
	path := filepath.Join(dir, name+".jsonl")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := rollout.Write(fh, rs); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(rewards[0]) {
		t.Fatal("nan reward")
	}
	return "file://" + path, rewards, rs
}

// bitShards writes rs as shards (rollouts and verdicts objects) at the given row ranges.
func bitShards(t *testing.T, dir string, rs []rollout.Rollout, rewards []float64, ranges [][2]int) []contract.ScoredShard {
	t.Helper()
	var out []contract.ScoredShard
	for s, r := range ranges {
		ro, vo := filepath.Join(dir, fmt.Sprintf("shard%d.jsonl", s)), filepath.Join(dir, fmt.Sprintf("shard%d.verdicts.jsonl", s))
		fh, err := os.Create(ro)
		if err != nil {
			t.Fatal(err)
		}
		if err := rollout.Write(fh, rs[r[0]:r[1]]); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		var v strings.Builder
		for i := r[0]; i < r[1]; i++ {
			fmt.Fprintf(&v, `{"id":%q,"score":%v}`+"\n", rs[i].ID, rewards[i])
		}
		if err := os.WriteFile(vo, []byte(v.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, contract.ScoredShard{Rollouts: "file://" + ro, Verdicts: "file://" + vo})
	}
	return out
}
