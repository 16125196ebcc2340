package modeldir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

func (r *Report) Text(w io.Writer) {
	fmt.Fprintf(w, "model       %s\n", r.Dir)
	fmt.Fprintf(w, "family      %s (%s)\n", r.Family, r.Architecture)
	if s := r.Sizes; s != nil {
		fmt.Fprintf(w, "sizes       %d layers, hidden %d, heads %d / kv heads %d, head_dim %d, ffn %d, vocab %d, context %d\n",
			s.Layers, s.Hidden, s.Heads, s.KVHeads, s.HeadDim, s.FFN, s.Vocab, s.Context)
		head := "its own lm_head"
		if s.TiedHead {
			head = "tied to the embeddings"
		}
		fmt.Fprintf(w, "parameters  %d (%.3f B), head %s\n", s.Parameters, float64(s.Parameters)/1e9, head)
	}
	if wt := r.Weights; wt != nil {
		fmt.Fprintf(w, "weights     %s, %.1f MB on disk, dtype %s (tensors: %s; trained in float32, written back in %s)\n",
			strings.Join(wt.Files, ", "), float64(wt.DiskBytes)/1e6, wt.DType, dtypeCounts(wt.Tensors), wt.DType)
	}
	if r.Attention != "" {
		fmt.Fprintf(w, "attention   %s\n", r.Attention)
		if len(r.LayerTypes) > 0 {
			fmt.Fprintf(w, "layers      %s\n", layerPattern(r.LayerTypes))
		}
	}
	switch t := r.Tokenizer; {
	case t == nil:
		fmt.Fprintln(w, "tokenizer   none (no tokenizer.json): Temper's byte-level tokenizer and DefaultChat")
	case t.Error != "":
		fmt.Fprintf(w, "tokenizer   %s: refused: %s\n", t.File, t.Error)
	default:
		fmt.Fprintf(w, "tokenizer   %s: %s model, pre-tokenizer %s, decoder %s, %d ids; bos %s, eos %s, pad %s, add_bos %v\n",
			t.File, t.Model, noneIfEmpty(t.PreTokenizer), noneIfEmpty(t.Decoder), t.Vocab, noneIfEmpty(t.BOS), noneIfEmpty(t.EOS), noneIfEmpty(t.PAD), t.AddBOS)
	}
	switch ch := r.Chat; {
	case ch == nil:
		fmt.Fprintln(w, "chat        no chat template: completions only (chat data needs one)")
	case ch.Error != "":
		fmt.Fprintf(w, "chat        %s: refused: %s\n", ch.File, ch.Error)
	default:
		fmt.Fprintf(w, "chat        %s (%s); tool calls: %s; a turn ends at %q\n", ch.File, strings.Join(ch.Templates, ", "), ch.ToolStyle, ch.EndOfTurn)
	}
	if g := r.Generation; g != nil {
		fmt.Fprintf(w, "generation  generation_config.json: eos ids %v (generation stops at them), bos %v, pad %v\n", g.EOS, g.BOS, g.Pad)
	} else {
		fmt.Fprintln(w, "generation  no generation_config.json")
	}
	if r.Refused != "" {
		fmt.Fprintf(w, "REFUSED     %s\n", r.Refused)
	}
	fmt.Fprintln(w, "config.json fields:")
	for _, use := range []string{hf.FieldRefused, hf.FieldIgnored, hf.FieldDefault, hf.FieldUsed} {
		var names []string
		for _, f := range r.Fields {
			if f.Use != use {
				continue
			}
			switch use {
			case hf.FieldRefused, hf.FieldIgnored:
				fmt.Fprintf(w, "  %-8s %s=%s: %s\n", use, f.Name, short(f.Value), f.Why)
			default:
				names = append(names, f.Name)
			}
		}
		if len(names) > 0 {
			what := map[string]string{hf.FieldUsed: "used", hf.FieldDefault: "default (read; the value Temper assumes without it)"}[use]
			fmt.Fprintf(w, "  %-8s %s\n", what, strings.Join(names, ", "))
		}
	}
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func short(v json.RawMessage) string {
	var b bytes.Buffer
	s := string(v)
	if json.Compact(&b, v) == nil {
		s = b.String()
	}
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

func dtypeCounts(m map[string]int) string {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[d], d))
	}
	return strings.Join(parts, ", ")
}

// layerPattern writes layer types compactly: S for sliding, F for full, layer 0 first.
func layerPattern(types []string) string {
	var b strings.Builder
	for _, t := range types {
		if t == modelcfg.LayerSliding {
			b.WriteByte('S')
		} else {
			b.WriteByte('F')
		}
	}
	return b.String() + " (S sliding, F full; layer 0 first)"
}
