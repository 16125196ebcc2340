//go:build linux

package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netProbe is a Python program that reports, one line each, what a sandboxed agent can do with the
// network: reach the worker's listener (given as argv[1]), another listener on the host's loopback
// (argv[2]), an outside address, and open sockets of other families; then what it sees of its
// mount and working directory.
const netProbe = `import os, socket, sys
def attempt(name, f):
    try:
        print(name, f())
    except OSError as e:
        print(name, "errno", e.errno)
def talk(port):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=2)
    s.sendall(b"ping\n")
    return s.makefile().readline().strip()
attempt("listener", lambda: talk(sys.argv[1]))
attempt("host", lambda: talk(sys.argv[2]))
attempt("outside", lambda: socket.create_connection(("10.1.2.3", 80), timeout=2))
attempt("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM))
attempt("unix", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
attempt("cwd", lambda: os.getcwd())
attempt("read", lambda: open("/agent/hello.txt").read().strip())
attempt("write", lambda: open("/agent/new.txt", "w"))
attempt("home", lambda: os.environ["HOME"])
`

// serveLines answers each connection's first line with reply + that line.
func serveLines(t *testing.T, accept func() (lineConn, error), reply string) {
	t.Helper()
	go func() {
		for {
			c, err := accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "%s %s", reply, line)
			}()
		}
	}()
}

type lineConn interface {
	Read([]byte) (int, error)
	Write([]byte) (int, error)
	Close() error
}

// TestLoopbackReachesOnlyItsListener: a run given a Loopback reaches the listener of its own
// namespace and nothing else — not a listener on the host's loopback, not an outside address, not
// another run's listener (each has its own namespace), and no socket family but IPv4; a read-only
// mount is readable and not writable, and the working directory is Command.Dir. Without a Loopback,
// even an IPv4 socket is denied.
func TestLoopbackReachesOnlyItsListener(t *testing.T) {
	s := newSandbox(t, Config{})
	needPython(t, s)
	if s.Mode() != ModeIsolated {
		t.Skipf("loopback networks need the isolated mode; this machine has %s", s.Mode())
	}
	host, err := net.Listen("tcp4", "127.0.0.1:0") // the host's loopback
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	serveLines(t, func() (lineConn, error) { return host.Accept() }, "host")
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agentDir, "probe.py"), []byte(netProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	var lbs [2]*Loopback
	for i := range lbs {
		lb, err := NewLoopback()
		if err != nil {
			t.Fatal(err)
		}
		defer lb.Close()
		serveLines(t, func() (lineConn, error) { return lb.Listener().Accept() }, fmt.Sprintf("gateway%d", i))
		lbs[i] = lb
	}
	port := func(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
	run := func(t *testing.T, c Command) map[string]string {
		t.Helper()
		res, err := s.Run(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		if f := res.Failure(); f != "" {
			t.Fatalf("probe failed: %s: %s", f, res.Stderr)
		}
		out := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			k, v, _ := strings.Cut(l, " ")
			out[k] = v
		}
		return out
	}
	probe := func(lb *Loopback, target string) Command {
		return Command{Path: s.Config().Python, Args: []string{"/agent/probe.py", port(target), port(host.Addr().String())},
			Net: lb, Mounts: []Mount{{Src: agentDir, Dst: "/agent"}}, Dir: "/agent", Limits: Limits{Timeout: 10 * time.Second}}
	}
	eperm, unreachable, refused := "errno 1", "errno 101", "errno 111"
	t.Run("own listener", func(t *testing.T) {
		got := run(t, probe(lbs[0], lbs[0].Addr()))
		want := map[string]string{"listener": "gateway0 ping", "host": refused, "outside": unreachable, "inet6": eperm, "unix": eperm,
			"netlink": eperm, "cwd": "/agent", "read": "hello", "write": "errno 30", "home": "/work"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: got %q, want %q", k, got[k], v)
			}
		}
	})
	t.Run("another run's listener", func(t *testing.T) {
		if got := run(t, probe(lbs[1], lbs[0].Addr())); got["listener"] != refused || got["inet6"] != eperm {
			t.Errorf("reached the other namespace's listener: %v", got)
		}
	})
	t.Run("no loopback", func(t *testing.T) {
		c := probe(nil, lbs[0].Addr())
		if got := run(t, c); got["listener"] != eperm || got["outside"] != eperm {
			t.Errorf("a run without a loopback opened an IPv4 socket: %v", got)
		}
	})
	t.Run("mount refused", func(t *testing.T) {
		for _, dst := range []string{"/", "/work/x", "/proc", "relative"} {
			c := probe(lbs[0], lbs[0].Addr())
			c.Mounts = []Mount{{Src: agentDir, Dst: dst}}
			if _, err := s.Run(t.Context(), c); err == nil || !strings.Contains(err.Error(), "mount") {
				t.Errorf("mount at %s: got %v, want an error naming the mount", dst, err)
			}
		}
	})
}
