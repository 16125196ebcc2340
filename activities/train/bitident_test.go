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
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/model/modelcfg"
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
	optim := trainapi.Optim{LR: 3e-3, WarmupSteps: 1, MinLRRatio: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}
	head := func(phase, from string, steps int) trainapi.ChunkHead {
		return trainapi.ChunkHead{Store: e.Store, Run: "b", Phase: phase, From: from, Steps: steps, TotalSteps: steps,
			Cursor: data.Cursor{Seed: 7}, Optim: optim, FreshOptimizer: true}
	}
	var base, other trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "b", Phase: "init", Model: tiny, Seed: 11}, &base)
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "b", Phase: "other", Model: tiny, Seed: 12}, &other)
	f.ckpt("init", base.Checkpoint)

	// SFT, full and LoRA.
	data := trainapi.DataSpec{Task: "add2", TrainExamples: 64, HeldoutExamples: 8}
	var sft, lora trainapi.ChunkOutput
	e.Must(trainapi.ChunkName, trainapi.ChunkInput{ChunkHead: head("sft", base.Checkpoint, 3), Data: data, Batch: trainapi.BatchSpec{Rows: 4, Seq: 32}}, &sft)
	f.chunk("sft", sft)
	e.Must(trainapi.ChunkName, trainapi.ChunkInput{ChunkHead: head("lora", sft.Checkpoint, 3), Data: data, Batch: trainapi.BatchSpec{Rows: 4, Seq: 32},
		LoRA: &modelcfg.LoRA{Rank: 4, Seed: 3}}, &lora)
	f.chunk("lora", lora)

	// Preference kinds: reference on the fly, precomputed, none.
	pdata := trainapi.PrefDataSpec{Task: "add2", TrainExamples: 24, HeldoutExamples: 8}
	for _, c := range []struct{ kind, mode string }{{losscfg.PrefDPO, "fly"}, {losscfg.PrefIPO, "pre"}, {losscfg.PrefORPO, ""}, {losscfg.PrefSimPO, ""},
		{losscfg.PrefKTO, "fly"}, {losscfg.PrefKTO, "pre"}} {
		name := "pref-" + c.kind + "-" + c.mode
		in := trainapi.PrefChunkInput{ChunkHead: head(name, sft.Checkpoint, 2), Data: pdata, Batch: trainapi.BatchSpec{Rows: 4, Seq: 16},
			Loss: losscfg.DefaultPreference(c.kind)}
		switch c.mode {
		case "fly":
			in.Reference = base.Checkpoint
		case "pre":
			var ro trainapi.RefLogProbsOutput
			e.Must(trainapi.RefLogProbsName, trainapi.RefLogProbsInput{Store: e.Store, Run: "b", Phase: name, Reference: base.Checkpoint,
				Data: pdata, Kind: c.kind, Seq: 16, Seed: 7}, &ro)
			in.RefData = ro.RefData
		}
		var out trainapi.ChunkOutput
		e.Must(trainapi.PrefChunkName, in, &out)
		f.chunk(name, out)
	}
	var pev trainapi.EvalOutput
	e.Must(trainapi.PrefEvaluateName, trainapi.PrefEvalInput{Store: e.Store, Checkpoint: sft.Checkpoint, Reference: base.Checkpoint, Data: pdata,
		Loss: losscfg.DefaultPreference(losscfg.PrefDPO), KLTokens: 4, Seed: 7}, &pev)
	f.metrics("pref-eval", pev.Metrics)

	// Reward model (generative term, LM term), its evaluation and the critic verifier.
	var rinit trainapi.RewardInitOutput
	e.Must(trainapi.RewardInitName, trainapi.RewardInitInput{Store: e.Store, Run: "b", Phase: "rm", From: sft.Checkpoint, Seed: 9, LogProb: true}, &rinit)
	f.ckpt("rm-init", rinit.Checkpoint)
	bt := objectivecfg.DefaultBT()
	bt.LMCoef = 0.1
	rdata := trainapi.RewardData{Task: "add2", TrainPairs: 32, HeldoutPairs: 8}
	var rm trainapi.ChunkOutput
	e.Must(trainapi.RewardChunkName, trainapi.RewardChunkInput{ChunkHead: head("rm", rinit.Checkpoint, 2), Data: rdata,
		Batch: trainapi.RewardBatch{Rows: 4, MaxSeq: 32}, Loss: bt}, &rm)
	f.chunk("rm", rm)
	var rev trainapi.RewardEvalOutput
	e.Must(trainapi.RewardEvaluateName, trainapi.RewardEvalInput{Store: e.Store, Checkpoint: rm.Checkpoint, Data: rdata, Loss: bt, Seed: 7}, &rev)
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
	var tg trainapi.DistillTargetsOutput
	e.Must(trainapi.DistillTargetsName, trainapi.DistillTargetsInput{Store: e.Store, Run: "b", Phase: "distill-pre", Teacher: other.Checkpoint,
		Data: data, Seq: 24, TopK: 4, Temperature: 2, Seed: 7}, &tg)
	gkd := objectivecfg.DefaultDistill()
	gkd.Divergence, gkd.Beta, gkd.Lambda, gkd.SampleTokens = objectivecfg.DivJSD, 0.5, 0.5, 4
	for _, c := range []struct {
		name             string
		cfg              objectivecfg.DistillConfig
		teacher, targets string
	}{{"distill-full", objectivecfg.DefaultDistill(), other.Checkpoint, ""}, {"distill-topk", top, other.Checkpoint, ""},
		{"distill-pre", top, "", tg.Targets}, {"distill-gkd", gkd, other.Checkpoint, ""}} {
		var out trainapi.ChunkOutput
		e.Must(trainapi.DistillChunkName, trainapi.DistillChunkInput{ChunkHead: head(c.name, sft.Checkpoint, 2), Data: data,
			Batch: trainapi.BatchSpec{Rows: 4, Seq: 24}, Loss: c.cfg, Teacher: c.teacher, Targets: c.targets}, &out)
		f.chunk(c.name, out)
	}

	// Policy steps.
	dir := t.TempDir()
	uri, rewards, rs := bitRollouts(t, sft.Checkpoint, dir, "plain", 24, false)
	shards := bitShards(t, dir, rs, rewards, [][2]int{{0, 8}, {8, 12}, {12, 24}})
	epURI, epRewards, _ := bitRollouts(t, sft.Checkpoint, dir, "episodes", 16, true)
	grpo := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	grpo.KLBeta = 0
	kl := losscfg.DefaultPolicyConfig(losscfg.AlgoGRPO)
	kl.KLBeta, kl.TISThreshold = 0.05, 2
	step := func(name string, in trainapi.PolicyStepInput) trainapi.PolicyStepOutput {
		t.Helper()
		in.Store, in.Run, in.Phase, in.LR = e.Store, "b", name, 3e-3
		if in.Policy == "" {
			in.Policy = sft.Checkpoint
		}
		in.Optim = optim
		var out trainapi.PolicyStepOutput
		e.Must(trainapi.PolicyStepName, in, &out)
		f.policy(name, out)
		return out
	}
	step("grpo-onpolicy", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: grpo, Epochs: 1, FreshOptimizer: true})
	step("grpo-kl-mb", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: kl, Reference: base.Checkpoint, Epochs: 2, Minibatch: 8,
		DynamicSampling: true, FreshOptimizer: true})
	step("grpo-kl-stream", trainapi.PolicyStepInput{Shards: shards, Loss: kl, Reference: base.Checkpoint, Epochs: 2, Minibatch: 8,
		DynamicSampling: true, FreshOptimizer: true})
	step("grpo-shards-mem", trainapi.PolicyStepInput{Shards: shards, Loss: kl, Reference: base.Checkpoint, Epochs: 1, FreshOptimizer: true})
	step("grpo-selfref", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: kl, Reference: sft.Checkpoint, Epochs: 1, FreshOptimizer: true})
	for _, algo := range []string{losscfg.AlgoDrGRPO, losscfg.AlgoRLOO, losscfg.AlgoReinforcePP, losscfg.AlgoDAPO, losscfg.AlgoGSPO} {
		lc := losscfg.DefaultPolicyConfig(algo)
		step("algo-"+algo, trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: lc, Reference: base.Checkpoint, Epochs: 2, Minibatch: 12, FreshOptimizer: true})
	}
	step("episodes", trainapi.PolicyStepInput{Rollouts: epURI, Rewards: epRewards, Loss: grpo, Epochs: 1, Minibatch: 8, FreshOptimizer: true})
	step("nan", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: grpo, Epochs: 1, InjectNaN: true, FreshOptimizer: true})
	step("from-lora", trainapi.PolicyStepInput{Policy: lora.Checkpoint, Rollouts: uri, Rewards: rewards, Loss: grpo, Epochs: 1, FreshOptimizer: true})
	v1 := step("grpo-v1", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: kl, Reference: base.Checkpoint, Epochs: 1, Minibatch: 12, FreshOptimizer: true})
	step("grpo-v2", trainapi.PolicyStepInput{Policy: v1.Checkpoint, Version: 1, Rollouts: uri, Rewards: rewards, Loss: kl, Reference: base.Checkpoint, Epochs: 1, Minibatch: 12})
	ppo := losscfg.DefaultPolicyConfig(losscfg.AlgoPPO)
	ppo.KLBeta = 0.02
	pc := trainapi.PPOConfig{Gamma: 1, Lambda: 0.9, KLCoef: 0.05, Seed: 5}
	p1 := step("ppo-v1", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: ppo, Reference: base.Checkpoint, Epochs: 2, Minibatch: 8, PPO: &pc, FreshOptimizer: true})
	step("ppo-v2", trainapi.PolicyStepInput{Policy: p1.Checkpoint, Version: 1, Rollouts: uri, Rewards: rewards, Loss: ppo, Reference: base.Checkpoint, Epochs: 1, PPO: &pc})
	step("ppo-shards", trainapi.PolicyStepInput{Shards: shards, Loss: ppo, Epochs: 1, Minibatch: 12, FreshOptimizer: true})
	var plainRM trainapi.RewardInitOutput
	e.Must(trainapi.RewardInitName, trainapi.RewardInitInput{Store: e.Store, Run: "b", Phase: "rm-plain", From: sft.Checkpoint, Seed: 9}, &plainRM)
	step("ppo-rm", trainapi.PolicyStepInput{Policy: plainRM.Checkpoint, Rollouts: uri, Rewards: rewards, Loss: ppo, Epochs: 1, FreshOptimizer: true})
	step("ppo-nan", trainapi.PolicyStepInput{Rollouts: uri, Rewards: rewards, Loss: ppo, Epochs: 1, InjectNaN: true, FreshOptimizer: true})

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

func (f *fingerprint) chunk(name string, out trainapi.ChunkOutput) {
	f.line("%s step %d cursor %+v loss %v last %v norm %v lr %v nonfinite %d", name, out.Step, out.Cursor, out.Loss, out.LastLoss, out.GradNorm, out.LR, out.NonFinite)
	f.metrics(name, out.Metrics)
	f.ckpt(name, out.Checkpoint)
}

func (f *fingerprint) policy(name string, out trainapi.PolicyStepOutput) {
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
func bitShards(t *testing.T, dir string, rs []rollout.Rollout, rewards []float64, ranges [][2]int) []trainapi.ScoredShard {
	t.Helper()
	var out []trainapi.ScoredShard
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
		out = append(out, trainapi.ScoredShard{Rollouts: "file://" + ro, Verdicts: "file://" + vo})
	}
	return out
}
