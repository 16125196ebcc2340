package train_test

import (
	"context"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/workers/traintest"
)

// TestEngineCaps: the workers' engine offers exactly the capabilities it was built with: adapters
// with EngineOptions.LoRA, values with a value head, logits always.
func TestEngineCaps(t *testing.T) {
	tiny := traintest.TinyModel(t)
	critic := tiny
	critic.ValueHead = true
	for _, c := range []struct {
		name                     string
		opts                     train.EngineOptions
		adapters, values, logits bool
	}{
		{"plain", train.EngineOptions{Model: tiny, Seed: 1}, false, false, true},
		{"value head", train.EngineOptions{Model: critic, Seed: 1}, false, true, true},
		{"lora", train.EngineOptions{Model: tiny, Seed: 1, LoRA: &model.LoRA{Rank: 2}}, true, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			eng, err := traintest.NewEngine(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			caps := eng.Caps()
			if (caps.Adapters != nil) != c.adapters || (caps.Values != nil) != c.values || (caps.Logits != nil) != c.logits {
				t.Fatalf("caps adapters %v values %v logits %v, want %v %v %v", caps.Adapters != nil, caps.Values != nil, caps.Logits != nil,
					c.adapters, c.values, c.logits)
			}
		})
	}
}

// lacking is an engine whose Caps hide every capability.
type lacking struct{ train.Engine }

func (lacking) Caps() train.Caps { return train.Caps{} }

// TestLoadersRefuseMissingCaps: a loader asks an engine for what the checkpoint needs when it loads
// it, and refuses an engine that lacks it, naming what is missing.
func TestLoadersRefuseMissingCaps(t *testing.T) {
	e := traintest.New(t)
	var base trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "c", Phase: "init", Model: modelcfg.Config(traintest.TinyModel(t)), Seed: 1}, &base)
	newLacking := func(o train.EngineOptions) (train.Engine, error) {
		eng, err := traintest.NewEngine(o)
		return lacking{eng}, err
	}
	lora := train.LoadOptions{LoRA: &model.LoRA{Rank: 2}}
	_, err := train.Loader{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: newLacking}.Load(context.Background(), base.Checkpoint, lora)
	if err == nil || !strings.Contains(err.Error(), "cannot hold LoRA adapters") {
		t.Fatalf("LoRA on an engine without adapters: %v", err)
	}
	m, err := train.Loader{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: traintest.NewEngine}.Load(context.Background(), base.Checkpoint, lora)
	if err != nil || m.Adapters == nil {
		t.Fatalf("LoRA on the workers' engine: %v", err)
	}
	m.Close()
}
