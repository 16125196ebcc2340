package ckpt

import "testing"

func TestSplitRunsURI(t *testing.T) {
	for _, tc := range []struct{ uri, root, run, phase string }{
		{"file:///s", "file:///s", "", ""},
		{"file:///s/", "file:///s", "", ""},
		{"gs://b/p/runs/r1", "gs://b/p", "r1", ""},
		{"gs://b/p/runs/r1/grpo.b1/", "gs://b/p", "r1", "grpo.b1"},
		{"file:///x/runs/a/runs/b/sft", "file:///x/runs/a", "b", "sft"}, // the last /runs/ is the store's
	} {
		root, run, phase := splitRunsURI(tc.uri)
		if root != tc.root || run != tc.run || phase != tc.phase {
			t.Errorf("splitRunsURI(%q) = %q, %q, %q; want %q, %q, %q", tc.uri, root, run, phase, tc.root, tc.run, tc.phase)
		}
	}
}
