//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupHelpers(t *testing.T) {
	owners := []struct {
		name string
		pid  int
		ok   bool
	}{
		{"run-123-4", 123, true}, {"probe-77", 77, true}, {"run-x-1", 0, false}, {"other", 0, false}, {"run-", 0, false},
	}
	for _, o := range owners {
		if pid, ok := cgroupOwner(o.name); pid != o.pid || ok != o.ok {
			t.Errorf("cgroupOwner(%q) = %d %v, want %d %v", o.name, pid, ok, o.pid, o.ok)
		}
	}
	p := filepath.Join(t.TempDir(), "memory.events")
	if err := os.WriteFile(p, []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := readKey(p, "max"); n != 3 || err != nil {
		t.Errorf("readKey max = %d %v", n, err)
	}
	if n, err := readKey(p, "oom"); n != 1 || err != nil {
		t.Errorf("readKey oom = %d %v (must not match oom_kill)", n, err)
	}
	if _, err := readKey(p, "missing"); err == nil {
		t.Error("readKey of a missing key: no error")
	}
}

func TestSeccompFilterAssembles(t *testing.T) {
	for _, inet := range []bool{false, true} {
		f, err := buildFilter(inet)
		if err != nil {
			t.Fatal(err) // a syscall name the library does not know, for one
		}
		// The program starts with our architecture check: load arch, compare, kill.
		if len(f) < 3 || f[0].Code != 0x20 || f[0].K != 4 || f[2].K != 0x80000000 {
			t.Errorf("filter (inet %v) does not start with the architecture check: %+v", inet, f[:min(3, len(f))])
		}
	}
}
