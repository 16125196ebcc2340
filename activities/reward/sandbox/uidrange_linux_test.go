package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// uidChildEnv makes TestUIDRangeChild hold a default-range sandbox for TestDefaultUIDRanges.
const uidChildEnv = "TEMPER_SANDBOX_UID_CHILD"

// TestUIDRangeChild is the other process of TestDefaultUIDRanges: it makes a sandbox with the
// default uid_base, prints its uid range and holds it until its standard input closes.
func TestUIDRangeChild(t *testing.T) {
	if os.Getenv(uidChildEnv) != "1" {
		t.Skip("run by TestDefaultUIDRanges")
	}
	s, err := New(Config{BaseDir: filepath.Join(t.TempDir(), "sb")})
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		return
	}
	fmt.Printf("RANGE %d %d\n", s.Config().UIDBase, s.Config().UIDBase+s.Config().Slots)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// TestDefaultUIDRanges: sandboxes left at the default uid_base never share a uid, whether they
// live in one process (a reward and an agent sandbox) or in two (a rollout and a reward worker on
// one host), each holding its range while the others are made; a sandbox's default base
// directory follows its range; a closed sandbox's range is claimed again.
func TestDefaultUIDRanges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxes switch uids: root only")
	}
	child := exec.Command(os.Args[0], "-test.run=^TestUIDRangeChild$", "-test.count=1")
	child.Env = append(os.Environ(), uidChildEnv+"=1")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); len(l) > 5 && (l[:6] == "RANGE " || l[:6] == "ERROR ") {
				line <- l
				break
			}
		}
		close(line)
	}()
	type span struct{ lo, hi int }
	var ranges []span
	select {
	case l := <-line:
		var r span
		if _, err := fmt.Sscanf(l, "RANGE %d %d", &r.lo, &r.hi); err != nil {
			t.Fatalf("child: %q", l)
		}
		ranges = append(ranges, r)
	case <-time.After(2 * time.Minute):
		t.Fatal("child made no sandbox in 2 minutes")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the default base directory, under this test's own directory
	var held []*Sandbox
	for i := range 2 {
		cfg := Config{Slots: 3}
		if i == 1 {
			cfg.BaseDir = filepath.Join(t.TempDir(), "sb")
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
		c := s.Config()
		ranges = append(ranges, span{c.UIDBase, c.UIDBase + c.Slots})
		if i == 0 {
			want := filepath.Join(tmp, "temper-sandbox")
			if k := (c.UIDBase - defaultUIDBase) / uidRangeStride; k > 0 {
				want += fmt.Sprint("-", k)
			}
			if c.BaseDir != want || (c.UIDBase-defaultUIDBase)%uidRangeStride != 0 {
				t.Errorf("uid base %d, base directory %s: want a multiple of %d past %d and %s", c.UIDBase, c.BaseDir, uidRangeStride, defaultUIDBase, want)
			}
		}
	}
	t.Logf("uid ranges (child, this process, this process): %v", ranges)
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.lo <= b.hi && b.lo <= a.hi {
				t.Fatalf("uid ranges %v and %v overlap: %v", a, b, ranges)
			}
		}
	}
	// Closed, a range is free: the next sandbox takes the lowest free one (another process of
	// this host may take it first, so only the order is checked).
	freed := ranges[1]
	if err := held[0].Close(); err != nil {
		t.Fatal(err)
	}
	again, err := New(Config{BaseDir: filepath.Join(t.TempDir(), "sb"), Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := again.Config().UIDBase; got > freed.lo && !heldElsewhere(t, freed.lo) {
		t.Errorf("after closing the sandbox of uids %d-%d the next took %d: the range was not released", freed.lo, freed.hi, got)
	}
	_ = held[1].Close()
}

// heldElsewhere reports whether the default range starting at uid is claimed now (by another
// sandbox of this host, which took it between a Close and the next New).
func heldElsewhere(t *testing.T, uid int) bool {
	f, err := os.Open(filepath.Join(uidLockDir, fmt.Sprintf("uids-%d.lock", (uid-defaultUIDBase)/uidRangeStride)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

func TestOwnRunDir(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"run-1600001-7", true},
		{"run-1600000-1", true}, // the builder's
		{"run-1600004-2", true},
		{"run-1600005-2", false}, // past the slots: another sandbox's
		{"run-1602049-3", false},
		{"run-x-3", false},
		{"run-1600001", false},
	} {
		if got := ownRunDir(c.name, 1600000, 1600004); got != c.want {
			t.Errorf("ownRunDir(%q, 1600000, 1600004) = %v, want %v", c.name, got, c.want)
		}
	}
}
