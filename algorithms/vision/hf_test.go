package vision

import (
	"bytes"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

func TestHFConfig(t *testing.T) {
	cases := []struct {
		name, json string
		want       visioncfg.Config
		err        string
	}{
		{name: "defaults of a siglip checkpoint", json: `{"model_type": "siglip", "architectures": ["SiglipModel"], "initializer_factor": 1.0,
			"text_config": {"vocab_size": 32000}, "vision_config": {"model_type": "siglip_vision_model"}, "torch_dtype": "float32"}`,
			want: visioncfg.Config{DModel: 768, Layers: 12, Heads: 12, FFN: 3072, Channels: 3, ImageSize: 224, PatchSize: 16,
				Activation: visioncfg.ActGELU, NormEps: 1e-6, UseHead: true}},
		{name: "paligemma-style tower", json: `{"model_type": "siglip_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
			"num_hidden_layers": 27, "num_attention_heads": 16, "image_size": 224, "patch_size": 14, "vision_use_head": false,
			"hidden_act": "gelu_new", "dtype": "bfloat16"}`,
			want: visioncfg.Config{DModel: 1152, Layers: 27, Heads: 16, FFN: 4304, Channels: 3, ImageSize: 224, PatchSize: 14,
				Activation: visioncfg.ActGELU, NormEps: 1e-6, UseHead: false}},
		{name: "quick_gelu", json: `{"model_type": "siglip_vision_model", "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5}`,
			want: visioncfg.Config{DModel: 768, Layers: 12, Heads: 12, FFN: 3072, Channels: 3, ImageSize: 224, PatchSize: 16,
				Activation: visioncfg.ActQuickGELU, NormEps: 1e-5, UseHead: true}},
		{name: "other model", json: `{"model_type": "clip_vision_model"}`, err: `model_type="clip_vision_model": allowed "siglip_vision_model", "siglip"`},
		{name: "unknown field", json: `{"model_type": "siglip_vision_model", "num_register_tokens": 4}`, err: `field "num_register_tokens" is not implemented`},
		{name: "unknown top-level field", json: `{"model_type": "siglip", "vision_config_dict": {}}`, err: `config.json: field "vision_config_dict" is not implemented`},
		{name: "dropout", json: `{"model_type": "siglip_vision_model", "attention_dropout": 0.1}`, err: "attention_dropout=0.1: only 0 is implemented"},
		{name: "activation", json: `{"model_type": "siglip_vision_model", "hidden_act": "relu"}`, err: `hidden_act="relu": allowed ["gelu" "gelu_new" "gelu_pytorch_tanh" "quick_gelu"]`},
		{name: "heads", json: `{"model_type": "siglip_vision_model", "hidden_size": 30, "num_attention_heads": 4}`, err: "heads=4: must divide d_model=30"},
		{name: "wrong nested type", json: `{"model_type": "siglip", "vision_config": {"model_type": "siglip_text_model"}}`, err: `vision_config: model_type="siglip_text_model"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := visioncfg.FromHFConfig([]byte(c.json))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("FromHFConfig: %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("FromHFConfig = %+v, want %+v", got, c.want)
			}
			back, err := visioncfg.ToHFConfig(got)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := visioncfg.FromHFConfig(back); err != nil || again != got {
				t.Fatalf("ToHFConfig does not read back: %+v, %v\n%s", again, err, back)
			}
		})
	}
	for _, name := range visioncfg.Presets() {
		c, err := visioncfg.Preset(name)
		if err != nil || c.Validate() != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	if c, _ := visioncfg.Preset("siglip-base-patch16-224"); c.ParamCount() != 92_884_224 {
		t.Errorf("siglip-base-patch16-224 vision tower: %d parameters, want 92,884,224 (the PyTorch reference's parameter count)", c.ParamCount())
	}
}

// TestHFWeightsRoundTrip: the tower's weights written back (WriteHF) are the reference file byte
// for byte, and ReadHF finds the tower under another prefix.
func TestHFWeightsRoundTrip(t *testing.T) {
	for _, g := range loadTowers(t) {
		w, _, err := ReadHF(g.cfg, bytes.NewReader(g.checkpoint), int64(len(g.checkpoint)))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteHF(&buf, g.cfg, w); err != nil {
			t.Fatal(err)
		}
		if g.Name != "siglip-full-nohead" && !bytes.Equal(buf.Bytes(), g.checkpoint) {
			t.Errorf("%s: WriteHF does not reproduce model.safetensors (%d vs %d bytes)", g.Name, buf.Len(), len(g.checkpoint))
		}
		// The same tensors under PaliGemma's prefix, next to an unrelated tensor.
		hf, err := ToHF(g.cfg, w, "model.vision_tower.vision_model.")
		if err != nil {
			t.Fatal(err)
		}
		hf["model.language_model.embed_tokens.weight"] = []float32{1, 2}
		var ts []safetensors.Tensor
		shapes := HFShapes(g.cfg, "model.vision_tower.vision_model.")
		shapes["model.language_model.embed_tokens.weight"] = []int{2}
		for _, name := range keys(hf) {
			tt, err := safetensors.FromFloat32(name, shapes[name], hf[name], safetensors.BF16)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tt)
		}
		buf.Reset()
		if err := safetensors.Write(&buf, ts, nil); err != nil {
			t.Fatal(err)
		}
		w2, prefix, err := ReadHF(g.cfg, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil || prefix != "model.vision_tower.vision_model." {
			t.Fatalf("%s: bf16 under another prefix: %q, %v", g.Name, prefix, err)
		}
		for path, v := range w {
			for i := range v {
				if d := v[i] - w2[path][i]; d > 0.01*(1+abs32(v[i])) || -d > 0.01*(1+abs32(v[i])) {
					t.Fatalf("%s: %s[%d] = %v after bf16, want %v", g.Name, path, i, w2[path][i], v[i])
				}
			}
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

func TestFromHFRefuses(t *testing.T) {
	gs := loadTowers(t)
	var g *towerGolden
	for _, x := range gs {
		if x.Name == "siglip-vision-head" {
			g = x
		}
	}
	w, _, err := ReadHF(g.cfg, bytes.NewReader(g.checkpoint), int64(len(g.checkpoint)))
	if err != nil {
		t.Fatal(err)
	}
	hf, err := ToHF(g.cfg, w, PrefixVisionModel)
	if err != nil {
		t.Fatal(err)
	}
	noHead := g.cfg
	noHead.UseHead = false
	if _, err := FromHF(noHead, hf, PrefixVisionModel); err == nil || !strings.Contains(err.Error(), `unexpected tensor "vision_model.head.`) {
		t.Errorf("a head the config does not have: %v", err)
	}
	fewer := g.cfg
	fewer.Layers = 1
	if _, err := FromHF(fewer, hf, PrefixVisionModel); err == nil || !strings.Contains(err.Error(), `unexpected tensor "vision_model.encoder.layers.1.`) {
		t.Errorf("more layers than the config: %v", err)
	}
	delete(hf, "vision_model.post_layernorm.bias")
	if _, err := FromHF(g.cfg, hf, PrefixVisionModel); err == nil || !strings.Contains(err.Error(), `tensor "vision_model.post_layernorm.bias" missing`) {
		t.Errorf("missing tensor: %v", err)
	}
	hf["vision_model.post_layernorm.bias"] = []float32{1}
	if _, err := FromHF(g.cfg, hf, PrefixVisionModel); err == nil || !strings.Contains(err.Error(), "has shape [1], want [32]") {
		t.Errorf("wrong shape: %v", err)
	}
	if _, err := DetectPrefix([]string{"text_model.embeddings.token_embedding.weight"}); err == nil {
		t.Error("DetectPrefix found a tower in a text model")
	}
}
