package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/reward/sandbox"
)

// TestPythonFunc runs programs in the real sandbox: stdout comes back trimmed, a failure says how
// it failed with the end of stderr, a program past its wall-time limit is killed, and a worker
// without a sandbox says so.
func TestPythonFunc(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{BaseDir: t.TempDir()})
	if err != nil || sb.Config().Python == "" {
		t.Skipf("no code sandbox with python here: %v", err)
	}
	run := PythonFunc(sb, sandbox.Limits{Timeout: 2 * time.Second})
	for _, c := range []struct {
		code, want, wantErr string
	}{
		{code: "print(6*7)\n\n", want: "42"},
		{code: "print(2**100)", want: "1267650600228229401496703205376"},
		{code: "import sys\nprint('bad input', file=sys.stderr)\nsys.exit(2)", wantErr: "exit status 2: bad input"},
		{code: "while True: pass", wantErr: "timeout"},
		{code: "import socket\nsocket.create_connection(('127.0.0.1', 80), 1)", wantErr: "exit status 1"},
	} {
		args, _ := json.Marshal(map[string]string{"code": c.code})
		out, err := run(context.Background(), args)
		switch {
		case c.wantErr == "" && (err != nil || out != c.want):
			t.Errorf("%q = %q, %v; want %q", c.code, out, err, c.want)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%q = %q, %v; want an error with %q", c.code, out, err, c.wantErr)
		}
	}
	if _, err := PythonFunc(nil, sandbox.Limits{})(context.Background(), json.RawMessage(`{"code":"1"}`)); err == nil || !strings.Contains(err.Error(), "no code sandbox") {
		t.Errorf("without a sandbox: %v", err)
	}
}
