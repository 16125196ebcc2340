package visioncfg

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	base, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		mut  func(*Config)
		want string
	}{
		{func(c *Config) { c.DModel = 0 }, "d_model=0: must be > 0"},
		{func(c *Config) { c.Heads = 3 }, "heads=3: must divide d_model=64"},
		{func(c *Config) { c.PatchSize = 40 }, "patch_size=40: must be <= image_size=32"},
		{func(c *Config) { c.Activation = "relu" }, `activation="relu": allowed ["gelu" "gelu_exact" "quick_gelu"]`},
		{func(c *Config) { c.NormEps = 0 }, "norm_eps=0: must be a finite value > 0"},
	}
	for _, c := range cases {
		cfg := base
		c.mut(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
	if base.Patches() != 16 || base.HeadDim() != 16 || base.PatchDim() != 192 {
		t.Errorf("tiny: %d patches, head_dim %d, patch_dim %d", base.Patches(), base.HeadDim(), base.PatchDim())
	}
	if _, err := Preset("huge"); err == nil || !strings.Contains(err.Error(), `allowed ["siglip-base-patch16-224"`) {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestLoRAConfig(t *testing.T) {
	l := LoRA{}.WithDefaults()
	if l.Rank != 8 || l.Alpha != 16 || l.Scale() != 2 || !l.Selects("fc1") || l.Validate() != nil {
		t.Fatalf("defaults %+v", l)
	}
	only := LoRA{Rank: 4, Targets: []string{"q_proj"}}.WithDefaults()
	if !only.Selects("q_proj") || only.Selects("v_proj") {
		t.Error("Selects")
	}
	for _, bad := range []LoRA{{Rank: -1}, {Rank: 2, Alpha: -1}, {Rank: 2, Targets: []string{"gate_proj"}}} {
		if err := bad.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
