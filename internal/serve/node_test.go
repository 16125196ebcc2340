package serve

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOpenAINodeClient runs the official openai npm client (scripts/serve, pinned package.json and
// lock) against two in-process servers: the tiny random byte-level model, and the scripted Qwen3
// tool caller. It needs node and the registry once (npm ci), so it runs only with
// TEMPER_NODE_TEST=1 go test -run TestOpenAINodeClient ./internal/serve/.
func TestOpenAINodeClient(t *testing.T) {
	if os.Getenv("TEMPER_NODE_TEST") == "" {
		t.Skip("set TEMPER_NODE_TEST=1 to run the openai npm client (node, npm ci in scripts/serve)")
	}
	dir, err := filepath.Abs("../../scripts/serve")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		ci := exec.Command("npm", "ci", "--no-audit", "--no-fund")
		ci.Dir = dir
		if out, err := ci.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	tiny := newTinyServer(t, "tiny")
	tools := newToolServer(t)
	cmd := exec.Command("node", "client.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TEMPER_BASE_URL="+tiny.http.URL+"/v1", "TEMPER_MODEL=tiny",
		"TEMPER_TOOLS_BASE_URL="+tools.http.URL+"/v1", "TEMPER_TOOLS_MODEL="+tools.m.Name)
	out, err := cmd.CombinedOutput()
	t.Logf("node client.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the openai npm client's test failed: %v", err)
	}
}
