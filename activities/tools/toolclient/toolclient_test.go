package toolclient

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCallID(t *testing.T) {
	a := CallID("run.grpo.tool.iter-000001.ex-3-0.t0", "python", json.RawMessage(`{"code":"1"}`))
	if a != CallID("run.grpo.tool.iter-000001.ex-3-0.t0", "python", json.RawMessage(`{"code":"1"}`)) {
		t.Fatal("CallID is not a function of its inputs")
	}
	if !strings.HasPrefix(a, "run.grpo.tool.iter-000001.ex-3-0.t0.python-") {
		t.Fatalf("CallID = %q: want the place first", a)
	}
	if a == CallID("run.grpo.tool.iter-000001.ex-3-0.t0", "python", json.RawMessage(`{"code":"2"}`)) {
		t.Fatal("other arguments, same ID")
	}
}
