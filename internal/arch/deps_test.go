package arch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// heavy are the dependencies that orchestration must never link: the math engine and the storage
// client. A workflow worker that links them drags GoMLX and the GCS client into every process that
// only orchestrates, and a workflow that can reach them can do I/O or tensor work it must not.
var heavy = []string{"github.com/gomlx/", "cloud.google.com/go/storage"}

// lightPackages are the packages whose whole dependency closure must stay free of heavy: workflows
// and everything they are allowed to import from the layers below (the roles' contracts and the
// algorithms' config leaves).
var lightPackages = []string{
	"workflows",
	"activities/train/trainapi",
	"activities/rollout/rolloutapi",
	"activities/reward/rewardapi",
	"activities/tools/toolsapi",
	"activities/demo/demoapi",
	"activities/control/controlapi",
	"algorithms/model/modelcfg",
	"algorithms/loss/losscfg",
	"algorithms/objective/objectivecfg",
	"algorithms/vision/visioncfg",
	"algorithms/imageproc",
}

// goListDeps returns the transitive imports of pkgs (go list -deps), keyed by package.
func goListDeps(t *testing.T, pkgs ...string) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range pkgs {
		cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./"+p)
		cmd.Dir = root
		cmd.Env = os.Environ()
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v\n%s", p, err, b)
		}
		out[p] = strings.Fields(string(b))
	}
	return out
}

func heavyIn(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, h := range heavy {
			if hasPrefixPath(d, h) {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

// TestWorkflowsLinkNoEngineNorStorage: workflows, and the contracts and config leaves they import,
// must not transitively import GoMLX or the GCS client (go list -deps, so an indirect path counts).
func TestWorkflowsLinkNoEngineNorStorage(t *testing.T) {
	deps := goListDeps(t, lightPackages...)
	for _, p := range lightPackages {
		if len(deps[p]) == 0 {
			t.Errorf("go list -deps ./%s listed nothing: is the walk broken?", p)
		}
		if bad := heavyIn(deps[p]); len(bad) > 0 {
			t.Errorf("%s transitively imports %s; it may import only the roles' contract packages and the algorithms' config leaves", p, strings.Join(bad, ", "))
		}
	}
}

// TestHeavyCheckCatchesIndirectImports keeps the check honest: the trainer implementation links
// GoMLX through tpu-facing code and the storage client through ckpt, so it must be reported.
func TestHeavyCheckCatchesIndirectImports(t *testing.T) {
	deps := goListDeps(t, "activities/train", "activities/ckpt")
	if bad := heavyIn(deps["activities/train"]); !containsPrefix(bad, "github.com/gomlx/") {
		t.Errorf("activities/train should be reported for GoMLX, got %v", bad)
	}
	if bad := heavyIn(deps["activities/ckpt"]); !containsPrefix(bad, "cloud.google.com/go/storage") {
		t.Errorf("activities/ckpt should be reported for the storage client, got %v", bad)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// sandbox is the code sandbox: Linux namespaces, seccomp, rlimits. Only the roles that run untrusted
// code may link it: reward and tools (verifiers, python), and rollout, which runs agent programs
// (rollout.agent) in it against a per-episode gateway.
const sandbox = "github.com/temperml/temper/activities/reward/sandbox"

// callersOfTools are the roles that play episodes and so call tools, through toolclient (a ToolCall
// workflow on the tools queue), never by running them: the trainer (every family). Rollout calls tools
// the same way but links the sandbox for agent episodes, so it is not listed.
var callersOfTools = []string{"activities/train/..."}

// TestToolCallersLinkNoSandbox: the trainer must not transitively import the code sandbox; a trainer
// host then needs no sandbox privileges and cannot run a tool by mistake.
func TestToolCallersLinkNoSandbox(t *testing.T) {
	deps := goListDeps(t, callersOfTools...)
	for _, p := range callersOfTools {
		if len(deps[p]) == 0 {
			t.Errorf("go list -deps ./%s listed nothing: is the walk broken?", p)
		}
		for _, d := range deps[p] {
			if hasPrefixPath(d, sandbox) {
				t.Errorf("%s transitively imports %s: call tools through activities/tools/toolclient", p, d)
			}
		}
	}
}

// TestSandboxCheckCatchesIndirectImports keeps that check honest: the tools role links the sandbox
// (to run python), and the walk must see it.
func TestSandboxCheckCatchesIndirectImports(t *testing.T) {
	deps := goListDeps(t, "activities/tools")
	if !containsPrefix(deps["activities/tools"], sandbox) {
		t.Errorf("go list -deps ./activities/tools should list %s, got %d packages", sandbox, len(deps["activities/tools"]))
	}
}
