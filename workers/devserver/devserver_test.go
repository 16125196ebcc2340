package devserver

import (
	"errors"
	"fmt"
	"net"
	"syscall"
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

// TestBuildOnTakenPortIsAnError: when a port the server was told to use is taken by the time it binds
// (two `temper demo` started at the same instant), building the server returns an "address in use"
// error, which Start retries, instead of panicking inside Temporal on the nil listener its Fatal log
// left behind.
func TestBuildOnTakenPortIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o := Options{IP: "127.0.0.1", FrontendPort: l.Addr().(*net.TCPAddr).Port, Namespace: "default"}
	srv, err := buildServer(&o, false)
	if err == nil {
		_ = srv.Stop()
		t.Fatal("built a server on a taken frontend port")
	}
	if !addrInUse(err) {
		t.Fatalf("error %q does not say the address is in use", err)
	}
	var fe *FatalError
	if !errors.As(err, &fe) {
		t.Fatalf("error %q is not the server's fatal log record", err)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("error %q does not wrap the bind error", err)
	}
}
