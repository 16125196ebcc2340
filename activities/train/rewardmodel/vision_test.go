package rewardmodel_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
	"github.com/temperml/temper/scripts/design"
	"github.com/temperml/temper/workers/traintest"
)

func tinyVision(t *testing.T) *trainapi.VisionModel {
	t.Helper()
	cfg, err := visioncfg.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return &trainapi.VisionModel{Config: cfg, Processor: imageproc.Default(cfg.ImageSize)}
}

// hugePNG is a valid PNG header (signature and IHDR with its CRC) of a w×h RGB image, no pixels.
func hugePNG(w, h uint32) []byte {
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	ihdr[12], ihdr[13] = 8, 2
	out := append([]byte("\x89PNG\r\n\x1a\n"), 0, 0, 0, 13)
	out = append(out, ihdr...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(ihdr))
}

func writeFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + path
}

func pairLine(chosen, rejected string) string {
	return `{"chosen":[{"type":"image","image":"` + chosen + `"}],"rejected":[{"type":"image","image":"` + rejected + `"}]}`
}

var visionOptim = trainapi.Optim{LR: 3e-3, WarmupSteps: 2, MinLRRatio: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}

// TestVisionRewardBadImages: a missing image file, a truncated PNG, a 20,000×20,000 PNG, a
// malformed data: URI, a text part and a text prompt are refused before any training step, as
// non-retryable errors naming the file, the line and the field; nothing is committed.
func TestVisionRewardBadImages(t *testing.T) {
	e := traintest.New(t)
	dir := t.TempDir()
	p := design.Pairs(1, 1, 0)[0]
	cpng, err := design.Render(p.Chosen, 32)
	if err != nil {
		t.Fatal(err)
	}
	good := writeFile(t, filepath.Join(dir, "good.png"), cpng)
	truncated := writeFile(t, filepath.Join(dir, "truncated.png"), cpng[:len(cpng)/2])
	huge := writeFile(t, filepath.Join(dir, "huge.png"), hugePNG(20000, 20000))
	missing := "file://" + filepath.Join(dir, "missing.png")
	var init trainapi.RewardInitOutput
	e.Must(trainapi.RewardInitName, trainapi.RewardInitInput{Store: e.Store, Run: "r", Phase: "rm", Seed: 1, Vision: tinyVision(t)}, &init)
	for _, c := range []struct {
		name, line string
		want       []string
	}{
		{"missing file", pairLine(good, missing), []string{"rejected[0].image", "missing.png", "not exist"}},
		{"truncated png", pairLine(truncated, good), []string{"chosen[0].image", "truncated.png", "truncated"}},
		{"huge png", pairLine(good, huge), []string{"rejected[0].image", "20000x20000", "max_pixels"}},
		{"bad base64", pairLine("data:image/png;base64,@@@", good), []string{"chosen[0].image", "base64"}},
		{"text part", `{"chosen":[{"type":"text","text":"hi"},{"type":"image","image":"` + good + `"}],"rejected":[{"type":"image","image":"` + good + `"}]}`, []string{"chosen", "text parts are not implemented"}},
		{"prompt", `{"prompt":"a poster","chosen":[{"type":"image","image":"` + good + `"}],"rejected":[{"type":"image","image":"` + good + `"}]}`, []string{"prompt", "not implemented"}},
		{"unknown field", `{"chosen":[{"type":"image","image":"` + good + `"}],"rejected":[{"type":"image","image":"` + good + `"}],"score":1}`, []string{`"score"`, "allowed fields"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".jsonl")
			writeFile(t, path, []byte(pairLine(good, good)+"\n"+c.line+"\n"))
			err := e.Run(trainapi.RewardChunkName, trainapi.RewardChunkInput{
				ChunkHead: trainapi.ChunkHead{Store: e.Store, Run: "r", Phase: "rm", From: init.Checkpoint, Steps: 1, TotalSteps: 1, Optim: visionOptim, FreshOptimizer: true},
				Data:      trainapi.RewardData{Train: "file://" + path}, Batch: trainapi.RewardBatch{Rows: 2, MaxSeq: 64}}, &trainapi.ChunkOutput{})
			if err == nil || !traintest.IsInvalidInput(err) {
				t.Fatalf("want a non-retryable error, got %v", err)
			}
			for _, w := range append([]string{filepath.Base(path) + ":2: "}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := e.Deps.Ckpt.Lookup(context.Background(), e.Store, "r", "rm", 1); !errors.Is(err, ckpt.ErrNotExist) {
				t.Errorf("a step was committed: %v", err)
			}
		})
	}
}

// TestVisionRewardChunks: a vision reward phase's chunks through the activities: step 0 is a
// vision checkpoint, chunks train and commit, a retried chunk returns the committed one, a chunk
// recomputed in another phase gives the same bytes, images are cached per phase, and evaluation
// reports the held-out metrics.
func TestVisionRewardChunks(t *testing.T) {
	e := traintest.New(t)
	dir := t.TempDir()
	if err := design.WritePairs(filepath.Join(dir, "train.jsonl"), design.Pairs(24, 1, 0.1), 32, false); err != nil {
		t.Fatal(err)
	}
	if err := design.WritePairs(filepath.Join(dir, "heldout.jsonl"), design.Pairs(10, 2, 0), 32, true); err != nil {
		t.Fatal(err)
	}
	spec := trainapi.RewardData{Train: "file://" + filepath.Join(dir, "train.jsonl"), Heldout: "file://" + filepath.Join(dir, "heldout.jsonl")}
	var init trainapi.RewardInitOutput
	e.Must(trainapi.RewardInitName, trainapi.RewardInitInput{Store: e.Store, Run: "r", Phase: "rm", Seed: 1, Vision: tinyVision(t)}, &init)
	if !init.NewHead {
		t.Fatalf("init %+v", init)
	}
	batch := trainapi.RewardBatch{Rows: 8, MaxSeq: 64}
	loss := objectivecfg.DefaultBT()
	chunk := func(phase, from string, step int, cur data.Cursor, fresh bool) trainapi.ChunkOutput {
		var out trainapi.ChunkOutput
		e.Must(trainapi.RewardChunkName, trainapi.RewardChunkInput{ChunkHead: trainapi.ChunkHead{Store: e.Store, Run: "r", Phase: phase, From: from, Step: step, Steps: 2, TotalSteps: 4, Cursor: cur, Optim: visionOptim, FreshOptimizer: fresh},
			Data: spec, Batch: batch, Loss: loss}, &out)
		return out
	}
	c1 := chunk("rm", init.Checkpoint, 0, data.Cursor{Seed: 3}, true)
	c2 := chunk("rm", c1.Checkpoint, 2, c1.Cursor, false)
	if c2.Step != 4 || c2.Metrics["pairs"] != 16 || c1.Resumed || !(c2.Loss > 0) || c2.NonFinite != 0 {
		t.Fatalf("chunks %+v / %+v", c1, c2)
	}
	again := chunk("rm", c1.Checkpoint, 2, c1.Cursor, false)
	if !again.Resumed || again.Checkpoint != c2.Checkpoint || again.Loss != c2.Loss {
		t.Fatalf("retried chunk %+v, want the committed %+v", again, c2)
	}
	d2 := chunk("rm2", c1.Checkpoint, 2, c1.Cursor, false)
	if d2.Resumed || traintest.SHA(t, d2.Checkpoint, trainapi.ModelFile) != traintest.SHA(t, c2.Checkpoint, trainapi.ModelFile) ||
		traintest.SHA(t, d2.Checkpoint, trainapi.OptimizerFile) != traintest.SHA(t, c2.Checkpoint, trainapi.OptimizerFile) {
		t.Fatal("a recomputed chunk differs from the committed one")
	}
	phaseDir := filepath.Dir(strings.TrimSuffix(strings.TrimPrefix(init.Checkpoint, "file://"), "/"))
	cached, err := filepath.Glob(filepath.Join(phaseDir, "images", "*.tpx"))
	if err != nil || len(cached) < 24 {
		t.Fatalf("%d cached images under %s, want one per distinct training image: %v", len(cached), phaseDir, err)
	}
	var ev trainapi.RewardEvalOutput
	e.Must(trainapi.RewardEvaluateName, trainapi.RewardEvalInput{Store: e.Store, Checkpoint: c2.Checkpoint, Data: spec, Batch: batch, Loss: loss}, &ev)
	m := ev.Metrics
	if m["heldout_pairs"] != 10 || !(m["heldout_pair_accuracy"] >= 0 && m["heldout_pair_accuracy"] <= 1) || !(m["heldout_bt_loss"] > 0) {
		t.Fatalf("metrics %v", m)
	}
	// Refused by name: an LM term, a task's text pairs, and starting from a checkpoint.
	bad := loss
	bad.LMCoef = 1
	err = e.Run(trainapi.RewardChunkName, trainapi.RewardChunkInput{ChunkHead: trainapi.ChunkHead{Store: e.Store, Run: "r", Phase: "bad", From: init.Checkpoint, Steps: 1, TotalSteps: 1, Optim: visionOptim},
		Data: spec, Batch: batch, Loss: bad}, &trainapi.ChunkOutput{})
	if err == nil || !traintest.IsInvalidInput(err) || !strings.Contains(err.Error(), "lm_coef") {
		t.Fatalf("lm_coef with a vision model: %v", err)
	}
	err = e.Run(trainapi.RewardInitName, trainapi.RewardInitInput{Store: e.Store, Run: "r", Phase: "bad2", From: init.Checkpoint, Vision: tinyVision(t)}, &trainapi.RewardInitOutput{})
	if err == nil || !traintest.IsInvalidInput(err) || !strings.Contains(err.Error(), "from=") {
		t.Fatalf("from with a vision model: %v", err)
	}
	_ = base64.StdEncoding
}
