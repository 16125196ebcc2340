package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/internal/config"
)

// PipelineName is the registered workflow type; `temporal workflow start --type Pipeline` uses it.
const PipelineName = "Pipeline"

// DefaultStoreName is the local activity, registered by workflow workers, that names their default store
// (file://$TEMPER_HOME/store) for a pipeline started without one (e.g. from the Temporal CLI).
const DefaultStoreName = "temper.DefaultStore"

// ProgressQuery is the query that returns a PipelineProgress.
const ProgressQuery = "progress"

// PipelineInput is a whole run: the same JSON that `temper run` sends and that
// `temporal workflow start --type Pipeline --task-queue temper --input '{...}'` accepts.
type PipelineInput struct {
	Name   string      `json:"name" help:"a label for the run; the workflow ID is derived from it"`
	Store  string      `json:"store" default:"file://$TEMPER_HOME/store" help:"root URI for checkpoints and data: file:///abs/dir or gs://bucket/prefix"`
	Seed   int64       `json:"seed" default:"0" help:"seed for every random choice of every phase"`
	Phases []PhaseSpec `json:"phases" help:"phases run in order; each starts from the previous one's checkpoint unless from is set"`
	// State carries progress across continue-as-new; users leave it empty.
	State *PipelineState `json:"state,omitempty" help:"set by the pipeline itself when it continues as new; leave empty"`
	// Parent is set by temper fork: the run and checkpoint this one starts from (its lineage).
	Parent *Lineage `json:"parent,omitempty" help:"the run, phase and checkpoint this run was forked from (set by the fork command)"`
}

// Lineage is where a forked run comes from.
type Lineage struct {
	Run        string   `json:"run" help:"the run forked from"`
	Phase      string   `json:"phase" help:"its phase (checkpoint directory) the fork starts from"`
	Step       int      `json:"step" help:"the checkpoint's step or iteration (-1: the phase's start, a re-run of the phase)"`
	Checkpoint string   `json:"checkpoint" help:"the checkpoint URI the first phase starts from"`
	Set        []string `json:"set,omitempty" help:"the overrides the fork was given"`
}

// PhaseSpec is one phase of a pipeline.
type PhaseSpec struct {
	Name string `json:"name" help:"unique within the pipeline; names the child workflow and checkpoint paths"`
	Kind string `json:"kind" help:"a registered phase kind (temper config explain lists them)"`
	From string `json:"from,omitempty" help:"checkpoint URI, or the name of an earlier phase; default: the previous phase's output"`
	// FromData trains on the data an earlier phase wrote (a search phase's SFT examples or pairs).
	FromData string          `json:"from_data,omitempty" help:"the name of an earlier phase that writes data (search): an sft phase trains on its verified solutions, a preference phase on its pairs"`
	Config   json.RawMessage `json:"config,omitempty" help:"the kind's configuration (temper config explain KIND)"`
	// Gate holds the phase until someone approves it or a condition on earlier metrics holds.
	Gate *GateSpec `json:"gate,omitempty" help:"hold the phase: require approval (temper approve/reject RUN), or a when: condition on the previous phase's metrics"`
}

// PipelineState is the loop state that continue-as-new carries.
type PipelineState struct {
	Next    int           `json:"next"`
	Results []PhaseResult `json:"results"`
	// Controls numbers the pipeline's control events (gates, fork); Log holds them.
	Controls int            `json:"controls,omitempty"`
	Log      []ControlEvent `json:"log,omitempty"`
}

// PhaseResult is what a finished phase left behind.
type PhaseResult struct {
	Name       string             `json:"name"`
	Kind       string             `json:"kind"`
	WorkflowID string             `json:"workflow_id"`
	Checkpoint string             `json:"checkpoint"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
	Data       *PhaseData         `json:"data,omitempty"`
	Seconds    float64            `json:"seconds"`
	Curve      []CurvePoint       `json:"curve,omitempty"`
	// Skipped says why a gate skipped the phase (its checkpoint is the one it would have started from).
	Skipped string `json:"skipped,omitempty"`
}

// PipelineOutput lists every phase's result in order.
type PipelineOutput struct {
	RunID   string        `json:"run_id"`
	Phases  []PhaseResult `json:"phases"`
	Seconds float64       `json:"seconds"`
	// Stopped says why a gate ended the pipeline before its last phase (the metric, or who rejected).
	Stopped string `json:"stopped,omitempty"`
}

// PipelineProgress answers ProgressQuery.
type PipelineProgress struct {
	Phase      string        `json:"phase"`
	Kind       string        `json:"kind"`
	Index      int           `json:"index"`
	Total      int           `json:"total"`
	ChildID    string        `json:"child_id"`
	Done       []PhaseResult `json:"done"`
	StartedAt  time.Time     `json:"started_at"`
	ContinueAs int           `json:"continued"`
	// Waiting is the gate the pipeline waits at (nil: none); Parent its lineage when forked.
	Waiting *GateWait `json:"waiting,omitempty"`
	Parent  *Lineage  `json:"parent,omitempty"`
}

// PhaseInput is what every phase workflow receives.
type PhaseInput struct {
	RunID  string          `json:"run_id"`
	Phase  string          `json:"phase"`
	Kind   string          `json:"kind"`
	Store  string          `json:"store"`
	Seed   int64           `json:"seed"`
	From   string          `json:"from,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
	// Search says the server has Temper's search attributes registered (see search.go); the pipeline
	// asks, and its phases set them only then.
	Search bool `json:"search_attributes,omitempty"`
	// Earlier lists the checkpoints of the phases that finished before this one, so that a config
	// field naming a phase (a distill phase's teacher) resolves to its checkpoint (resolvePhaseRef).
	Earlier []PhaseCheckpoint `json:"earlier,omitempty"`
	// Loop carries a chunked phase's loop state across its continue-as-new; nil on first start.
	Loop *LoopState `json:"loop,omitempty"`
	// RL carries an RL phase's loop state across its continue-as-new; nil on first start.
	RL *RLState `json:"rl,omitempty"`
	// Tree carries a search phase's loop state across its continue-as-new; nil on first start.
	Tree *TreeSearchState `json:"tree_search,omitempty"`
	// FromData is the data of the phase that from_data names; the phase trains on it.
	FromData *PhaseData `json:"from_data,omitempty"`
}

// PhaseData names the data objects a phase wrote for later phases (from_data).
type PhaseData struct {
	SFT     string `json:"sft,omitempty"`     // prompt/completion JSONL: verified solutions
	Pairs   string `json:"pairs,omitempty"`   // preference JSONL: {prompt, chosen, rejected}
	Heldout string `json:"heldout,omitempty"` // prompt/completion JSONL the phase held out, for evaluation
	Steps   string `json:"steps,omitempty"`   // step-labelled JSONL (tasks.StepExample) of the search's solutions
}

// PhaseCheckpoint is a finished phase's output checkpoint.
type PhaseCheckpoint struct {
	Name       string `json:"name"`
	Checkpoint string `json:"checkpoint"`
}

// PhaseOutput is what every phase workflow returns.
type PhaseOutput struct {
	Checkpoint string             `json:"checkpoint"`
	Metrics    map[string]float64 `json:"metrics,omitempty"`
	// Curve is held-out exact match against training wall time, one point per evaluation.
	Curve []CurvePoint `json:"curve,omitempty"`
	// Data names the data the phase wrote for later phases (kinds with MakesData).
	Data *PhaseData `json:"data,omitempty"`
}

// CurvePoint is one evaluation of a phase: Seconds of training wall time so far (the phase's
// training activities, measured with workflow time; evaluations excluded), the optimizer step or RL
// iteration, and held-out exact match.
type CurvePoint struct {
	Seconds    float64 `json:"seconds"`
	Step       int     `json:"step"`
	ExactMatch float64 `json:"heldout_exact_match"`
	// RewardMean is an RL phase's mean sampled reward over the iterations since the previous point
	// (on fresh prompts, so it tracks sampled accuracy while exact match tracks greedy decoding).
	RewardMean float64 `json:"reward_mean,omitempty"`
	// Score is the phase's headline held-out metric when it is not exact match (held-out preference
	// accuracy of a preference phase, pairwise accuracy of a reward phase).
	Score float64 `json:"score,omitempty"`
}

// Validate checks the pipeline and every phase's config with its kind's type.
func (in *PipelineInput) Validate() error {
	if len(in.Phases) == 0 {
		return &config.FieldError{Path: "phases", Msg: "at least one phase is required (kinds: " + strings.Join(phaseKindNames(), ", ") + ")"}
	}
	if in.Store != "" && !strings.HasPrefix(in.Store, "file:///") && !strings.HasPrefix(in.Store, "gs://") {
		return &config.FieldError{Path: "store", Msg: fmt.Sprintf("%q: want file:///abs/dir or gs://bucket/prefix", in.Store)}
	}
	seen := map[string]int{}
	for i, p := range in.Phases {
		path := fmt.Sprintf("phases[%d]", i)
		if p.Name == "" {
			return &config.FieldError{Path: path + ".name", Msg: "required"}
		}
		if strings.ContainsAny(p.Name, "/ \t") {
			return &config.FieldError{Path: path + ".name", Msg: fmt.Sprintf("%q: no slashes or spaces", p.Name)}
		}
		if j, dup := seen[p.Name]; dup {
			return &config.FieldError{Path: path + ".name", Msg: fmt.Sprintf("%q already names phases[%d]", p.Name, j)}
		}
		seen[p.Name] = i
		if p.From != "" && !strings.Contains(p.From, "://") {
			if _, ok := seen[p.From]; !ok || p.From == p.Name {
				return &config.FieldError{Path: path + ".from", Msg: fmt.Sprintf("%q is neither a URI nor an earlier phase", p.From)}
			}
		}
		cfg, err := DecodePhaseConfig(p.Kind, p.Config, path+".config")
		if err != nil {
			return err
		}
		if rm, ok := cfg.(*RewardModelConfig); ok && rm.Model.Vision != nil && p.From != "" {
			return &config.FieldError{Path: path + ".from", Msg: "a vision reward phase starts from a seeded tower (starting from a checkpoint is not implemented): leave from out"}
		}
		if r, ok := cfg.(refersToPhases); ok {
			for _, ref := range r.PhaseRefs() {
				if ref.Value == "" || strings.Contains(ref.Value, "://") {
					continue
				}
				if _, ok := seen[ref.Value]; !ok || ref.Value == p.Name {
					return &config.FieldError{Path: path + ".config." + ref.Path, Msg: fmt.Sprintf("%q is neither a checkpoint URI nor an earlier phase", ref.Value)}
				}
			}
		}
		if err := in.checkFromData(i, p, seen); err != nil {
			return err
		}
		if p.Gate != nil {
			if err := p.Gate.validate(path+".gate", i, seen); err != nil {
				return err
			}
		}
		if n, ok := cfg.(startsFromCheckpoint); ok && i == 0 && p.From == "" {
			if why := n.NeedsFrom(); why != "" {
				return &config.FieldError{Path: path + ".from", Msg: fmt.Sprintf("%s phase %q: %s", p.Kind, p.Name, why)}
			}
		}
	}
	return nil
}

// Pipeline runs the phases in order as child workflows, passing checkpoint URIs along, holding a
// phase at its gate, and continues as new between phases when the server suggests it.
func Pipeline(ctx workflow.Context, in PipelineInput) (PipelineOutput, error) {
	p, err := newPipelineRun(ctx, in)
	if err != nil {
		return PipelineOutput{}, err
	}
	for i := p.state.Next; i < len(p.in.Phases); i++ {
		if out, end, err := p.phase(i); end || err != nil {
			return out, err
		}
	}
	return p.output(""), nil
}

// phaseFromData is the data of the phase spec's from_data names (nil without from_data); a phase
// that wrote none is bad config.
func phaseFromData(runID string, spec PhaseSpec, done []PhaseResult) (*PhaseData, error) {
	if spec.FromData == "" {
		return nil, nil
	}
	d := resolveFromData(spec.FromData, done)
	if d == nil {
		err := fmt.Errorf("pipeline %s: phase %s: from_data %q wrote no data", runID, spec.Name, spec.FromData)
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	return d, nil
}

// earlierCheckpoints lists the finished phases' checkpoints for PhaseInput.Earlier.
func earlierCheckpoints(done []PhaseResult) []PhaseCheckpoint {
	var out []PhaseCheckpoint
	for _, r := range done {
		out = append(out, PhaseCheckpoint{Name: r.Name, Checkpoint: r.Checkpoint})
	}
	return out
}

// resolveFrom turns a phase's `from` into a checkpoint URI: a URI as given, an earlier phase's output by
// name, or by default the previous phase's output ("" for the first phase).
func resolveFrom(spec PhaseSpec, i int, done []PhaseResult) string {
	if strings.Contains(spec.From, "://") {
		return spec.From
	}
	if spec.From != "" {
		for _, r := range done {
			if r.Name == spec.From {
				return r.Checkpoint
			}
		}
	}
	if i > 0 && len(done) >= i {
		return done[i-1].Checkpoint
	}
	return ""
}

// checkFromData validates phase i's from_data: an earlier phase (seen) whose kind writes data, read by
// a kind that trains on it.
func (in *PipelineInput) checkFromData(i int, p PhaseSpec, seen map[string]int) error {
	if p.FromData == "" {
		return nil
	}
	path := fmt.Sprintf("phases[%d].from_data", i)
	j, ok := seen[p.FromData]
	if !ok || j >= i {
		return &config.FieldError{Path: path, Msg: fmt.Sprintf("%q is not an earlier phase", p.FromData)}
	}
	src, _ := LookupPhase(in.Phases[j].Kind) // validated before
	if !src.MakesData {
		var makers []string
		for _, k := range PhaseKinds() {
			if k.MakesData {
				makers = append(makers, k.Kind)
			}
		}
		return &config.FieldError{Path: path, Msg: fmt.Sprintf("phase %q is a %s phase, which writes no data (kinds that do: %s)", p.FromData, src.Kind, strings.Join(makers, ", "))}
	}
	if k, _ := LookupPhase(p.Kind); k.TakesData == "" {
		return &config.FieldError{Path: path, Msg: fmt.Sprintf("a %s phase does not train on another phase's data (sft, prm and the preference kinds do)", p.Kind)}
	}
	return nil
}

// resolveFromData returns the data of the named finished phase (nil if it wrote none).
func resolveFromData(name string, done []PhaseResult) *PhaseData {
	for _, r := range done {
		if r.Name == name {
			return r.Data
		}
	}
	return nil
}
