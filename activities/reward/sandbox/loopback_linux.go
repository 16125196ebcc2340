package sandbox

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Loopback is a network namespace of its own whose only interface is a loopback that is up, with
// one TCP listener on it that the worker serves (an agent's model endpoint). A run given it
// (Command.Net) joins that namespace instead of a fresh one without network, and may open IPv4
// sockets: it can reach the listener, and whatever it listens on itself, and nothing else — the
// namespace has no other interface, and every other socket family stays denied.
type Loopback struct {
	ns *os.File // /proc/thread-self/ns/net of the thread that made it
	ln net.Listener
}

// NewLoopback makes the namespace and its listener (127.0.0.1, a free port). Creating a network
// namespace needs root, as the isolated mode does.
func NewLoopback() (*Loopback, error) {
	type made struct {
		l   *Loopback
		err error
	}
	done := make(chan made, 1)
	go func() {
		// The thread moves into the new namespace and is never unlocked: Go ends it with the
		// goroutine, so no other goroutine ever runs in that namespace.
		runtime.LockOSThread()
		l, err := newLoopback()
		done <- made{l, err}
	}()
	m := <-done
	return m.l, m.err
}

func newLoopback() (*Loopback, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("sandbox: loopback: new network namespace: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return nil, fmt.Errorf("sandbox: loopback: %w", err)
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("sandbox: loopback: %w", err)
	}
	// The socket belongs to the namespace of the thread that creates it, whichever thread later
	// accepts on it.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("sandbox: loopback: listen: %w", err)
	}
	return &Loopback{ns: ns, ln: ln}, nil
}

// loopbackUp sets lo up in the calling thread's network namespace (a new one has it down).
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// Listener is the namespace's listener: serve it (close it with Close, not directly).
func (l *Loopback) Listener() net.Listener { return l.ln }

// Addr is the listener's address inside the namespace (127.0.0.1:port).
func (l *Loopback) Addr() string { return l.ln.Addr().String() }

// Close closes the listener and the namespace handle; the namespace goes when its last process
// does.
func (l *Loopback) Close() error {
	err := l.ln.Close()
	if cerr := l.ns.Close(); err == nil {
		err = cerr
	}
	return err
}
