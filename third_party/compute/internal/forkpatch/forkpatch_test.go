// Temper fork: see third_party/README.md.

package forkpatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestPatchIsCurrent runs `third_party/fork.sh check`: the committed patch must equal the one
// written from the fork's files now, and applying it to the pristine upstream must give the fork
// back. Outside a Temper checkout (the fork used on its own) there is no patch to check.
func TestPatchIsCurrent(t *testing.T) {
	script, err := filepath.Abs("../../../fork.sh")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Skipf("no %s: not a Temper checkout", script)
	}
	if err := exec.Command("git", "-C", filepath.Dir(script), "rev-parse", "--git-dir").Run(); err != nil {
		t.Skipf("%s is not in a git checkout: %v", script, err)
	}
	out, err := exec.Command("bash", script, "check").CombinedOutput()
	if err != nil {
		t.Fatalf("third_party/fork.sh check: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
