package policy

import (
	"reflect"
	"testing"

	"github.com/temperml/temper/algorithms/rollout"
)

// TestSegmentRows: an agent's further segment becomes a row of its own right after its episode's
// row, with the episode's group and advantage; its row's loss mask and behaviour log-probs cover its
// policy tokens only, under its own prompt. Rollouts without segments are left as they are.
func TestSegmentRows(t *testing.T) {
	ep := rollout.Rollout{ID: "ep", Group: 0, PromptTokens: []int{1, 2}, Tokens: []int{3, 4}, Policy: []bool{true, true}, LogProbs: []float32{-.1, -.2},
		Segments: []rollout.Segment{{PromptTokens: []int{1, 9}, Tokens: []int{5, 6, 7}, Policy: []bool{true, false, true}, LogProbs: []float32{-.3, 0, -.4}}}}
	plain := rollout.Rollout{ID: "plain", Group: 0, PromptTokens: []int{1, 2}, Tokens: []int{8}, LogProbs: []float32{-.5}}
	other := rollout.Rollout{ID: "other", Group: 1, PromptTokens: []int{1}, Tokens: []int{8}, LogProbs: []float32{-.5}}
	cases := []struct {
		name    string
		rs      []rollout.Rollout
		idx     []int
		wantIdx []int
		wantAdv []float64
	}{
		{"no segments", []rollout.Rollout{plain, other}, []int{0, 1}, []int{0, 1}, []float64{0.5, -0.5}},
		{"a segment follows its episode", []rollout.Rollout{plain, ep, other}, []int{0, 1, 2}, []int{0, 1, 3, 2}, []float64{0.5, -0.5, 0.25, -0.5}},
		{"a dropped episode's segment stays out", []rollout.Rollout{plain, ep, other}, []int{2}, []int{2}, []float64{0.5, -0.5, 0.25}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			adv := []float64{0.5, -0.5, 0.25}[:len(c.rs)]
			rs, gotAdv, idx := segmentRows(append([]rollout.Rollout(nil), c.rs...), append([]float64(nil), adv...), c.idx)
			if !reflect.DeepEqual(idx, c.wantIdx) || !reflect.DeepEqual(gotAdv, c.wantAdv) {
				t.Fatalf("rows %v advantages %v, want %v %v", idx, gotAdv, c.wantIdx, c.wantAdv)
			}
			if len(idx) != 4 {
				return
			}
			seg := rs[3]
			if seg.ID != "ep" || seg.Group != 0 || !reflect.DeepEqual(seg.PromptTokens, []int{1, 9}) {
				t.Fatalf("segment row %+v", seg)
			}
			p := buildPolicyRows(rs, gotAdv, idx)
			// Row 2 is the segment: tokens 1 9 5 6 7; targets at positions 1..3 are its tokens 5 6 7.
			if got, want := p.mask[2][:5], []float32{0, 1, 0, 1, 0}; !reflect.DeepEqual(got, want) {
				t.Errorf("segment row mask %v, want %v (its policy tokens only)", got, want)
			}
			if got, want := p.behaviour[2][:5], []float32{0, -.3, 0, -.4, 0}; !reflect.DeepEqual(got, want) {
				t.Errorf("segment row behaviour log-probs %v, want %v", got, want)
			}
			if got, want := p.tokens[2][:4], []int{1, 9, 5, 6}; !reflect.DeepEqual(got, want) {
				t.Errorf("segment row tokens %v, want %v (under its own prompt)", got, want)
			}
			if p.adv[1] != 0.5*-1 || p.adv[2] != p.adv[1] {
				t.Errorf("advantages %v: want the segment's to be its episode's", p.adv)
			}
		})
	}
}

// TestRowEpisodes: every row segmentRows lays out maps to its rollout, a further segment's row to
// the episode it follows (what PPO's GAE joins into one trajectory).
func TestRowEpisodes(t *testing.T) {
	for _, c := range []struct {
		name string
		idx  []int
		n    int
		want []int
	}{
		{"no segments", []int{0, 1, 2}, 3, []int{0, 1, 2}},
		{"segments after their episodes", []int{0, 1, 3, 4, 2, 5}, 3, []int{0, 1, 2, 1, 1, 2}},
		{"a dropped rollout keeps its own index", []int{1, 2, 3}, 3, []int{0, 1, 2, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := rowEpisodes(c.idx, c.n); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("rowEpisodes(%v, %d) = %v, want %v", c.idx, c.n, got, c.want)
			}
		})
	}
}
