package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestBenchPeerFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "model", "--peer", "--repeats", "0"}, "--repeats=0: must be >= 1"},
		{[]string{"bench", "model", "--peer", "--peer-decode-attend", "all"}, `--peer-decode-attend="all": allowed "filled", "full"`},
		// No build or machine here has a PJRT plugin: one error, naming the tag or what to install.
		{[]string{"bench", "model", "--backend", "xla", "--presets", "tiny"}, `tpu: new backend xla`},
		{[]string{"bench", "model", "--plugin", "tpu", "--presets", "tiny"}, `plugin "tpu"`},
	} {
		out, err := cli(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v (output %q), want %q", tc.args, err, out, tc.want)
		}
	}
}

func TestBackendFlags(t *testing.T) {
	for _, tc := range []struct{ backend, plugin, wantBackend, wantPlugin string }{
		{"", "", "go", ""},
		{"go", "", "go", ""},
		{"xla", "", "xla", "cpu"},
		{"", "cuda", "xla", "cuda"},
		{"", "/opt/libtpu.so", "xla", "/opt/libtpu.so"},
		{"go", "cpu", "go", "cpu"}, // contradictory: tpu.Options.Validate names it
	} {
		b, p := backendFlags(tc.backend, tc.plugin)
		if b != tc.wantBackend || p != tc.wantPlugin {
			t.Errorf("backendFlags(%q, %q) = %q, %q; want %q, %q", tc.backend, tc.plugin, b, p, tc.wantBackend, tc.wantPlugin)
		}
	}
}

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("1, 2"); err != nil || !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("parseCounts(1, 2) = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "x", "1,", "99999"} {
		if _, err := parseCounts(bad); err == nil || !strings.Contains(err.Error(), "--rollout-workers") {
			t.Errorf("parseCounts(%q): %v, want an error naming the flag", bad, err)
		}
	}
}
