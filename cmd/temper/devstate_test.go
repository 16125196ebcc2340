package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/workers"
)

// TestApplyTemporalEnv: what `temper dev` does with an exported TEMPORAL_ADDRESS, for each way it can be
// set, and that it always says so.
func TestApplyTemporalEnv(t *testing.T) {
	cases := []struct {
		name, env string
		args      []string
		wantIP    string
		wantPort  int
		wantMsg   string // "" : silent
		wantErr   string
	}{
		{"unset", "", nil, "127.0.0.1", 7233, "", ""},
		{"loopback: serve there", "127.0.0.1:7300", nil, "127.0.0.1", 7300, "TEMPORAL_ADDRESS=127.0.0.1:7300: serving the embedded Temporal server there", ""},
		{"localhost: serve there", "localhost:7301", nil, "127.0.0.1", 7301, "serving the embedded Temporal server there", ""},
		{"remote: ignored", "temporal.example.com:7233", nil, "127.0.0.1", 7233, "TEMPORAL_ADDRESS=temporal.example.com:7233 ignored: temper dev serves its own Temporal server on 127.0.0.1:7233 (use --temporal temporal.example.com:7233", ""},
		{"--port wins", "127.0.0.1:7300", []string{"--port", "7400"}, "127.0.0.1", 7400, "ignored", ""},
		{"--temporal wins silently", "127.0.0.1:7300", []string{"--temporal", "127.0.0.1:7500"}, "127.0.0.1", 7233, "", ""},
		{"malformed", "7300", nil, "", 0, "", `TEMPORAL_ADDRESS="7300": want host:port`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TEMPORAL_ADDRESS", c.env)
			fs := flag.NewFlagSet("dev", flag.ContinueOnError)
			var s stackFlags
			s.bind(fs, "dev")
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			err := s.prepare(&w)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.ip != c.wantIP || s.port != c.wantPort {
				t.Errorf("serves %s:%d, want %s:%d", s.ip, s.port, c.wantIP, c.wantPort)
			}
			if (c.wantMsg == "") != (w.Len() == 0) || !strings.Contains(w.String(), c.wantMsg) {
				t.Errorf("said %q, want %q", w.String(), c.wantMsg)
			}
		})
	}
}

// TestDevExplicitTemporalUnreachable: `temper dev --temporal ADDR` with nothing there fails at once,
// naming the address and the flag, instead of dialing for 20 s and printing "connection refused".
func TestDevExplicitTemporalUnreachable(t *testing.T) {
	start := time.Now()
	_, err := cli(t, "dev", "--temporal", "127.0.0.1:1", "--home", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no Temporal server at 127.0.0.1:1 (--temporal)") {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v to fail", d)
	}
}

// TestClientLinksFollowDevState: client commands take the server address and the Web UI base of the
// `temper dev` recorded in $TEMPER_HOME/dev.json while its server answers; flags override; a stale
// file (nothing listening) is ignored.
func TestClientLinksFollowDevState(t *testing.T) {
	home := t.TempDir()
	t.Setenv("TEMPER_HOME", home)
	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("TEMPER_UI_URL", "")
	l, err := net.Listen("tcp", "127.0.0.1:0") // stands in for the dev server's frontend
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	b, _ := json.Marshal(workers.DevState{Temporal: addr, UI: "http://127.0.0.1:9999"})
	if err := os.WriteFile(workers.DevStatePath(home), b, 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) *clientFlags {
		var c clientFlags
		fs := flag.NewFlagSet("status", flag.ContinueOnError)
		c.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &c
	}
	cases := []struct {
		name      string
		args      []string
		wantAddr  string
		wantLink  string
		closeDown bool
	}{
		{"dev's server and UI", nil, addr, "http://127.0.0.1:9999/namespaces/default/workflows/r1", false},
		{"--ui overrides", []string{"--ui", "http://ui.example:80/"}, addr, "http://ui.example:80/namespaces/default/workflows/r1", false},
		{"another server: default UI", []string{"--temporal", "127.0.0.1:7233"}, "127.0.0.1:7233", "http://127.0.0.1:8233/namespaces/default/workflows/r1", false},
		{"stale dev.json ignored", nil, "127.0.0.1:7233", "http://127.0.0.1:8233/namespaces/default/workflows/r1", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.closeDown {
				l.Close()
			}
			cf := parse(c.args...)
			if cf.temporal != c.wantAddr || cf.runURL("r1") != c.wantLink {
				t.Errorf("temporal %s link %s, want %s %s", cf.temporal, cf.runURL("r1"), c.wantAddr, c.wantLink)
			}
		})
	}
	l.Close()
	b, _ = json.Marshal(workers.DevState{Temporal: addr, UI: ""})
	os.WriteFile(workers.DevStatePath(home), b, 0o644)
	if l, err = net.Listen("tcp", addr); err == nil {
		defer l.Close()
		if got := parse().runURL("r1"); !strings.Contains(got, "no Web UI") {
			t.Errorf("dev without UI: link %q", got)
		}
	}
}

// startDevProcess runs the test binary as `temper dev ARGS` with extra environment, its output in a
// log file whose contents the returned function reads.
func startDevProcess(t *testing.T, env []string, args ...string) func() string {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"dev"}, args...)...)
	cmd.Env = append(append(os.Environ(), "TEMPER_TEST_MAIN=1"), env...)
	logPath := filepath.Join(t.TempDir(), "dev.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	return func() string { b, _ := os.ReadFile(logPath); return string(b) }
}

func waitReachable(t *testing.T, addr string, log func() string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !workers.Reachable(addr) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s; dev said:\n%s", addr, log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDevServesOnTemporalAddress runs `temper dev` as a process with TEMPORAL_ADDRESS exported (a
// loopback one: it serves there and says so), then `temper run` and `temper status` with no flags: they
// find that server through dev.json and link to the Web UI port it really serves, not 8233.
func TestDevServesOnTemporalAddress(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("subprocess test; runs in CI and without -short")
	}
	home := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	uiPort := freePort(t)
	log := startDevProcess(t, []string{"TEMPORAL_ADDRESS=" + addr, "TEMPER_HOME=" + home},
		"--ui-port", fmt.Sprint(uiPort), "--roles", "temper")
	waitReachable(t, addr, log)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log(), "Workers") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(log(), "TEMPORAL_ADDRESS="+addr+": serving the embedded Temporal server there") {
		t.Errorf("dev did not say what it does with TEMPORAL_ADDRESS:\n%s", log())
	}
	t.Setenv("TEMPER_HOME", home)
	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("TEMPER_UI_URL", "")
	link := fmt.Sprintf("http://127.0.0.1:%d/namespaces/default/workflows/ui-port-1", uiPort)
	p := writeFile(t, "p.yaml", "name: ui\nphases:\n- {name: a, kind: demo, config: {steps: 100, step_duration: 1s}}\n")
	out, err := cli(t, "run", p, "--id", "ui-port-1")
	if err != nil || !strings.Contains(out, "web ui  "+link) {
		t.Fatalf("run: %v\n%s\nwant link %s", err, out, link)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		out, err = cli(t, "status", "ui-port-1")
		if err == nil && strings.Contains(out, link) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: %v\n%s\nwant link %s", err, out, link)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cli(t, "cancel", "ui-port-1")
}
