package workflows

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/temperml/temper/internal/config"
)

// PhaseConfig is a phase kind's configuration: a plain struct with JSON tags and Validate.
type PhaseConfig interface {
	Validate() error
}

// PhaseKind describes one kind of pipeline phase. Kinds register themselves in an init function of the
// file that defines their workflow.
type PhaseKind struct {
	Kind         string             // name used in pipeline configs: "demo", "sft", ...
	WorkflowName string             // registered workflow type: "Demo", "SFT", ...
	Doc          string             // one line for `temper config explain`
	NewConfig    func() PhaseConfig // a pointer to a config holding the documented defaults
	Workflow     any                // func(workflow.Context, PhaseInput) (PhaseOutput, error)
	// MakesData says the phase writes data later phases can train on (PhaseOutput.Data).
	MakesData bool
	// TakesData says what a phase trains on when from_data names a phase that writes data:
	// DataSFT, DataPairs or DataSteps ("": it takes none).
	TakesData string
}

// What a phase takes from another phase's data (PhaseKind.TakesData).
const (
	DataSFT   = "sft"
	DataPairs = "pairs"
	DataSteps = "steps" // step-labelled solutions (tasks.StepExample), for a prm phase
)

var phaseKinds = map[string]PhaseKind{}

// RegisterPhase adds a phase kind; it is called from init functions only, so a duplicate is a
// programming error reported at start-up.
func RegisterPhase(k PhaseKind) {
	if _, dup := phaseKinds[k.Kind]; dup {
		panic("workflows: phase kind registered twice: " + k.Kind)
	}
	phaseKinds[k.Kind] = k
}

// LookupPhase returns the registered kind.
func LookupPhase(kind string) (PhaseKind, bool) {
	k, ok := phaseKinds[kind]
	return k, ok
}

// PhaseKinds lists the registered kinds sorted by name (sorted: map order never leaks out).
func PhaseKinds() []PhaseKind {
	names := make([]string, 0, len(phaseKinds))
	for n := range phaseKinds {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]PhaseKind, len(names))
	for i, n := range names {
		out[i] = phaseKinds[n]
	}
	return out
}

func phaseKindNames() []string {
	var names []string
	for _, k := range PhaseKinds() {
		names = append(names, k.Kind)
	}
	return names
}

// DecodePhaseConfig decodes raw over the kind's defaults strictly (unknown fields name their path and a
// suggestion) and validates it. path prefixes error messages ("phases[1].config").
func DecodePhaseConfig(kind string, raw json.RawMessage, path string) (PhaseConfig, error) {
	k, ok := LookupPhase(kind)
	if !ok {
		return nil, unknownKind(kind, path)
	}
	cfg := k.NewConfig()
	if len(raw) > 0 && string(raw) != "null" {
		tree, err := config.ParseTree(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := config.Decode(tree, cfg, path); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		var fe *config.FieldError
		if asFieldError(err, &fe) {
			return nil, &config.FieldError{Path: path + "." + fe.Path, Msg: fe.Msg}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func asFieldError(err error, fe **config.FieldError) bool {
	f, ok := err.(*config.FieldError)
	if ok {
		*fe = f
	}
	return ok
}

func unknownKind(kind, path string) error {
	names := phaseKindNames()
	msg := fmt.Sprintf("unknown phase kind %q", kind)
	if s := config.Closest(kind, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return &config.FieldError{Path: strings.TrimSuffix(path, ".config") + ".kind", Msg: msg + " (allowed: " + strings.Join(names, ", ") + ")"}
}

// ExplainPhase renders the kind's config fields with their types, defaults and help.
func ExplainPhase(kind string) (string, error) {
	k, ok := LookupPhase(kind)
	if !ok {
		return "", unknownKind(kind, "phase")
	}
	defaults, _ := json.Marshal(k.NewConfig())
	live := liveExplainPaths(kind)
	mark := func(path string) string {
		if _, ok := live[path]; ok {
			return "[live]"
		}
		return ""
	}
	text := fmt.Sprintf("%s (workflow %s): %s\n\n%s\ndefaults: %s\n", k.Kind, k.WorkflowName, k.Doc,
		config.ExplainMarked(reflect.ValueOf(k.NewConfig()).Elem().Interface(), mark), defaults)
	if len(live) > 0 {
		text += "\n[live]: `temper set RUN PHASE key=value` changes the field while the phase runs, at its next boundary; see docs/steering.md\n"
	}
	return text, nil
}
