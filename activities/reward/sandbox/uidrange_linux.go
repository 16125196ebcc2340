package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Default uid ranges. Every sandbox of a host that leaves uid_base at its default claims a range of
// its own: a restricted run ends with kill(-1) as its slot uid and a sweep of that uid's files, and
// RLIMIT_NPROC counts per uid, so two sandboxes sharing slot uids (a rollout and a reward worker
// on one host, or two sandboxes in one process) would kill and starve each other's runs.
//
// The claim is an exclusive flock on the range's lock file, held while the Sandbox lives: the
// kernel drops it when the process dies however it dies (SIGKILL included), so a crashed worker
// never strands its range, and the next sandbox takes the lowest free range, which keeps a
// restarted single worker on range 0 (its uids, base directory and Go build cache as before).
// A range derived from the pid was the other choice: pids are recycled and reduced modulo the
// ranges they collide, and every restart would land on a cold build cache.
const (
	// uidRangeStride exceeds the most uids one sandbox uses (the builder and 1024 slots).
	uidRangeStride = 2048
	// uidRanges bounds the live sandboxes with default uids per host: range 47 ends at 1698303,
	// below 1700000 where this package's tests keep their explicit ranges.
	uidRanges = 48
)

// uidLockDir holds the lock files of the default ranges: root's, outside anything a sandboxed
// program can write (not /tmp or /run/lock, whose top-level entries a restricted run may create).
var uidLockDir = "/run/temper-sandbox"

// claimUIDRange takes the lowest free default uid range; the caller holds the returned file (its
// lock) for as long as it uses the range's uids.
func claimUIDRange(dir string) (*os.File, int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("sandbox: new: claim a uid range: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("sandbox: new: claim a uid range: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return nil, 0, fmt.Errorf("sandbox: new: claim a uid range: %s must be a directory of uid %d that no one else writes (mode %v): set uid_base or fix it", dir, os.Geteuid(), fi.Mode())
	}
	for i := range uidRanges {
		p := filepath.Join(dir, "uids-"+strconv.Itoa(i)+".lock")
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600) // close-on-exec: helpers never inherit the lock
		if err != nil {
			return nil, 0, fmt.Errorf("sandbox: new: claim uid range %d: %w", i, err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, i, nil
		}
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, 0, fmt.Errorf("sandbox: new: claim uid range %d: lock %s: %w", i, p, err)
		}
	}
	return nil, 0, fmt.Errorf("sandbox: new: all %d default uid ranges (lock files in %s) are held by live sandboxes: set uid_base", uidRanges, dir)
}

// ownRunDir reports whether a work directory name (run-UID-SEQ, newWorkDir) belongs to uids in
// [lo, hi]: New removes only its own stale directories, never those of a live sandbox of another
// range that shares the base directory.
func ownRunDir(name string, lo, hi int) bool {
	uid, _, ok := strings.Cut(strings.TrimPrefix(name, "run-"), "-")
	n, err := strconv.Atoi(uid)
	return ok && err == nil && n >= lo && n <= hi
}
