package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups is where per-run control groups are made: under the worker's own cgroup, in a
// "temper-sandbox" directory, one child per run. A cgroup bounds what rlimits cannot: memory of
// the whole tree including shared memory, memfd and tmpfs pages (which live outside any address
// space), the number of tasks of the tree, and the CPU time of the tree (polled).
type cgroups struct {
	v2 bool
	// v1: the memory, pids and cpuacct parents; v2: one parent.
	mem, pids, cpu string
	memsw          bool // v1: memory.memsw.* exists (swap accounting): shm cannot escape to swap
	swap           bool // v2: memory.swap.max exists
}

const cgroupParent = "temper-sandbox"

// probeCgroups finds a writable cgroup hierarchy: v2 with the memory and pids controllers
// delegated, else v1 memory, pids and cpuacct. It makes and removes one run cgroup to prove it.
func probeCgroups() (*cgroups, error) {
	own, err := readOwnCgroups()
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var errs []string
	if mnt, ok := mounts[""]; ok {
		cg, err := probeV2(filepath.Join(mnt, own[""]))
		if err == nil {
			return cg, nil
		}
		errs = append(errs, "v2: "+err.Error())
	}
	cg := &cgroups{}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"memory", &cg.mem}, {"pids", &cg.pids}, {"cpuacct", &cg.cpu}} {
		mnt, ok := mounts[c.name]
		if !ok {
			errs = append(errs, "v1: no "+c.name+" hierarchy mounted")
			return nil, errors.New(strings.Join(errs, "; "))
		}
		*c.dst = filepath.Join(mnt, own[c.name], cgroupParent)
	}
	err = func() error {
		for _, d := range []string{cg.mem, cg.pids, cg.cpu} {
			if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
		}
		_, err := os.Stat(filepath.Join(cg.mem, "memory.memsw.limit_in_bytes"))
		cg.memsw = err == nil
		return cg.tryRun()
	}()
	if err != nil {
		errs = append(errs, "v1: "+err.Error())
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return cg, nil
}

func probeV2(own string) (*cgroups, error) {
	b, err := os.ReadFile(filepath.Join(own, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	have := strings.Fields(string(b))
	for _, c := range []string{"memory", "pids"} {
		if !contains(have, c) {
			return nil, fmt.Errorf("%s: controller %s not delegated (have %q)", own, c, have)
		}
	}
	parent := filepath.Join(own, cgroupParent)
	if err := os.Mkdir(parent, 0o755); err != nil && !os.IsExist(err) {
		return nil, err
	}
	// Fails with EBUSY where own holds processes (no internal processes in v2): the worker must
	// then run in a leaf of a delegated subtree for per-run limits.
	for _, p := range []string{own, parent} {
		if err := os.WriteFile(filepath.Join(p, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
			return nil, fmt.Errorf("enable memory and pids below %s: %w", p, err)
		}
	}
	cg := &cgroups{v2: true, mem: parent, pids: parent, cpu: parent}
	_, err = os.Stat(filepath.Join(parent, "memory.swap.max"))
	cg.swap = err == nil
	return cg, cg.tryRun()
}

func (c *cgroups) tryRun() error {
	rc, err := c.create(fmt.Sprintf("probe-%d", os.Getpid()), 64<<20, 8)
	if err != nil {
		return err
	}
	if _, err := rc.cpuUsage(); err != nil {
		rc.remove()
		return err
	}
	return rc.remove()
}

// readOwnCgroups maps each v1 controller ("" for v2) to this process's cgroup path.
func readOwnCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, nil
}

// cgroupMounts maps each v1 controller ("" for v2) to its mount point, from mountinfo.
func cgroupMounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent maj:min root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f1, f2 := strings.Fields(pre), strings.Fields(post)
		if len(f1) < 5 || len(f2) < 3 || f1[3] != "/" {
			continue // a bind of a sub-cgroup: paths from /proc/self/cgroup do not apply
		}
		switch f2[0] {
		case "cgroup2":
			if _, ok := out[""]; !ok {
				out[""] = f1[4]
			}
		case "cgroup":
			for _, o := range strings.Split(f2[2], ",") {
				if _, ok := out[o]; !ok && (o == "memory" || o == "pids" || o == "cpuacct") {
					out[o] = f1[4]
				}
			}
		}
	}
	return out, sc.Err()
}

// runCgroup is one run's control group (one directory per v1 hierarchy).
type runCgroup struct {
	c    *cgroups
	dirs []string // mem, pids, cpu (v1) or the one directory (v2)
}

func (c *cgroups) create(name string, memory int64, pids int) (*runCgroup, error) {
	rc := &runCgroup{c: c}
	parents := []string{c.mem, c.pids, c.cpu}
	if c.v2 {
		parents = parents[:1]
	}
	for _, p := range parents {
		d := filepath.Join(p, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			rc.remove()
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		rc.dirs = append(rc.dirs, d)
	}
	mem, np := strconv.FormatInt(memory, 10), strconv.Itoa(pids)
	// {directory, file, value}, in order: v1 wants memory.limit_in_bytes before memsw.
	writes := [][3]string{{rc.dirs[0], "memory.max", mem}, {rc.dirs[0], "pids.max", np}}
	if c.v2 && c.swap {
		writes = append(writes, [3]string{rc.dirs[0], "memory.swap.max", "0"})
	}
	if !c.v2 {
		writes = [][3]string{{rc.dirs[0], "memory.limit_in_bytes", mem}, {rc.dirs[1], "pids.max", np}}
		if c.memsw {
			writes = append(writes, [3]string{rc.dirs[0], "memory.memsw.limit_in_bytes", mem})
		}
	}
	for _, w := range writes {
		if err := os.WriteFile(filepath.Join(w[0], w[1]), []byte(w[2]), 0); err != nil {
			rc.remove()
			return nil, fmt.Errorf("cgroup: set %s: %w", w[1], err)
		}
	}
	return rc, nil
}

// procsFiles are the files the helper writes "0" to, joining the run's cgroup(s).
func (rc *runCgroup) procsFiles() []string {
	out := make([]string, len(rc.dirs))
	for i, d := range rc.dirs {
		out[i] = filepath.Join(d, "cgroup.procs")
	}
	return out
}

func (rc *runCgroup) cpuDir() string { return rc.dirs[len(rc.dirs)-1] }

// cpuUsage is the CPU time the run's tree has used so far.
func (rc *runCgroup) cpuUsage() (time.Duration, error) {
	if !rc.c.v2 {
		b, err := os.ReadFile(filepath.Join(rc.cpuDir(), "cpuacct.usage"))
		if err != nil {
			return 0, err
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns), err
	}
	us, err := readKey(filepath.Join(rc.cpuDir(), "cpu.stat"), "usage_usec")
	return time.Duration(us) * time.Microsecond, err
}

// memoryHit reports whether the run's memory reached its limit.
func (rc *runCgroup) memoryHit() bool {
	if rc.c.v2 {
		m, _ := readKey(filepath.Join(rc.dirs[0], "memory.events"), "max")
		o, _ := readKey(filepath.Join(rc.dirs[0], "memory.events"), "oom_kill")
		return m > 0 || o > 0
	}
	b, _ := os.ReadFile(filepath.Join(rc.dirs[0], "memory.failcnt"))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	o, _ := readKey(filepath.Join(rc.dirs[0], "memory.oom_control"), "oom_kill")
	return n > 0 || o > 0
}

// pidsHit reports whether a fork or clone of the run failed at pids.max.
func (rc *runCgroup) pidsHit() bool {
	n, _ := readKey(filepath.Join(rc.dirs[min(1, len(rc.dirs)-1)], "pids.events"), "max")
	return n > 0
}

// kill ends every task of the run at once where the kernel can (cgroup v2's cgroup.kill); v1
// relies on the PID namespace or the uid sweep.
func (rc *runCgroup) kill() {
	if rc.c.v2 {
		_ = os.WriteFile(filepath.Join(rc.dirs[0], "cgroup.kill"), []byte("1"), 0)
	}
}

// remove deletes the run's cgroup(s), waiting briefly for exiting tasks to leave; a cgroup still
// busy after that is left for New's sweep.
func (rc *runCgroup) remove() error {
	var last error
	for _, d := range rc.dirs {
		for i := 0; ; i++ {
			err := syscall.Rmdir(d)
			if err == nil || err == syscall.ENOENT {
				break
			}
			if err != syscall.EBUSY || i >= 200 {
				last = fmt.Errorf("cgroup: remove %s: %w", d, err)
				break
			}
			time.Sleep(time.Duration(min(i+1, 20)) * time.Millisecond)
		}
	}
	return last
}

// sweep removes run cgroups whose worker process is gone (left by a crash).
func (c *cgroups) sweep() {
	for _, p := range []string{c.mem, c.pids, c.cpu} {
		entries, _ := os.ReadDir(p)
		for _, e := range entries {
			pid, ok := cgroupOwner(e.Name())
			if !e.IsDir() || !ok {
				continue
			}
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil && pid != os.Getpid() {
				continue
			}
			if pid == os.Getpid() && !strings.HasPrefix(e.Name(), "probe-") {
				continue
			}
			_ = syscall.Rmdir(filepath.Join(p, e.Name()))
		}
	}
}

// cgroupOwner parses the worker pid out of "run-<pid>-<n>" or "probe-<pid>".
func cgroupOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "run-")
	if !ok {
		rest, ok = strings.CutPrefix(name, "probe-")
	}
	if !ok {
		return 0, false
	}
	pid, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(pid)
	return n, err == nil
}

// readKey reads the integer after "key " in a flat-keyed cgroup file.
func readKey(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %q", path, key)
}
