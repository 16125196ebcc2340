package devserver

import (
	"errors"
	"fmt"
	"net"
	"testing"
)

// TestAddrInUse: a real bind collision and Temporal's flattened fx error text both count as "address
// in use" (and are retried with fresh ports); other build errors do not.
func TestAddrInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, bindErr := net.Listen("tcp", l.Addr().String())
	if bindErr == nil {
		t.Fatal("second listen on the same address succeeded")
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("devserver: build temporal: %w", bindErr), true},
		{errors.New(`failed listening for HTTP API on 127.0.0.1:38907: listen tcp 127.0.0.1:38907: bind: address already in use`), true},
		{errors.New("devserver: namespace default: bad search attribute"), false},
	} {
		if got := addrInUse(c.err); got != c.want {
			t.Errorf("addrInUse(%q) = %v, want %v", c.err, got, c.want)
		}
	}
}
