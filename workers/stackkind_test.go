package workers

import (
	"net"
	"testing"
)

// TestStackKindAt: a stack started for a command says so on its namespace, read back over the real
// server; a stack started for none, and a port that is not a Temporal server, read as "".
func TestStackKindAt(t *testing.T) {
	for _, kind := range []string{"demo", ""} {
		st, err := StartStack(StackOptions{Home: t.TempDir(), Ephemeral: true, UIPort: -1, Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		got := StackKindAt(st.Address, DefaultNamespace)
		st.Close()
		if got != kind {
			t.Errorf("stack started as %q reads as %q", kind, got)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if got := StackKindAt(l.Addr().String(), DefaultNamespace); got != "" {
		t.Errorf("a plain TCP listener reads as %q", got)
	}
}
