package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/temperml/temper/internal/config"
)

// Steering a running run (docs/steering.md): `temper set` changes a live field of the running phase,
// `temper pause` / `resume` hold it at a boundary, `temper approve` / `reject` decide a gate between
// phases. Each is a Temporal Update, so each accepted one is an event in the history; a validator
// refuses a bad one before anything is written. A phase applies what it accepted at its next
// boundary (between two RL iterations, or two chunks), never inside an activity, so a run given the
// same changes at the same boundaries makes the same activity inputs, whatever else happened.

// The Updates and the Query of steering. Pipelines and the phases that steer (RL and chunked kinds)
// take set, pause and resume (a pipeline forwards them to its running phase); pipelines take approve
// and reject; SteerQuery answers a phase's live state.
const (
	UpdateSet     = "set"
	UpdatePause   = "pause"
	UpdateResume  = "resume"
	UpdateApprove = "approve"
	UpdateReject  = "reject"
	SteerQuery    = "steer"
)

// ForwardName is the local activity, registered by workflow workers (it needs a client), that sends
// a pipeline's set/pause/resume on to its running phase workflow (the newest back-tracking branch
// when the phase has branched) and returns that workflow's reply.
const ForwardName = "temper.Forward"

// versionSteer gates everything steering does to a history (applying changes, pausing, gates,
// lineage): a run that nobody steers records nothing new, and histories from before replay as they ran.
const versionSteer = "temper-steer"

// Control events (ControlEvent.Event, and the metrics log's control records).
const (
	EventSet     = "set"
	EventPause   = "pause"
	EventResume  = "resume"
	EventApprove = "approve"
	EventReject  = "reject"
	EventTimeout = "timeout" // an approval gate's wait ran out
	EventGate    = "gate"    // a when: gate's decision
	EventFork    = "fork"    // the run started as a fork of another
)

// SteerRequest is the argument of every steering Update.
type SteerRequest struct {
	// Phase names the phase a pipeline forwards to (default: the running one); a phase checks it is its own.
	Phase string `json:"phase,omitempty"`
	// Set are the changes of a set: "key=value", key a live field (`temper config explain KIND`).
	Set []string `json:"set,omitempty"`
	// At asks a set or pause to apply at this boundary (after At iterations or steps) instead of the
	// next one; it must not be behind the next one. Reproducing a run's change exactly uses it.
	At   int    `json:"at,omitempty"`
	Note string `json:"note,omitempty"`
	By   string `json:"by,omitempty"` // who asked (the CLI sends user@host)
}

// Change is one field a set changes, with its value before and after (as JSON numbers).
type Change struct {
	Key string `json:"key"`
	Old string `json:"old"`
	New string `json:"new"`
}

// SteerReply answers a steering Update: which workflow took it and where it applies.
type SteerReply struct {
	Workflow string `json:"workflow"`
	Phase    string `json:"phase,omitempty"`
	Unit     string `json:"unit,omitempty"` // "iteration" or "step"
	// Done is how many iterations or steps the phase had completed when it accepted the request; At
	// is the boundary it applies at: after At of them, so the first one that runs with it is At+1.
	Done    int      `json:"done"`
	At      int      `json:"at"`
	Changes []Change `json:"changes,omitempty"`
	Message string   `json:"message"`
}

// Assignment is one live field's new value, as a set carries it: Key as the user named it, Path
// where it sits in the config (a verifier's label resolved to its index).
type Assignment struct {
	Key     string  `json:"key"`
	Path    string  `json:"path"`
	Value   float64 `json:"value"`
	Integer bool    `json:"integer,omitempty"`
}

// ControlEvent is one accepted change, pause, resume or gate decision of a phase or pipeline.
type ControlEvent struct {
	Seq      int          `json:"seq"`
	Event    string       `json:"event"`
	At       int          `json:"at"`                // the boundary it applies (applied) at
	Accepted time.Time    `json:"accepted"`          // workflow time of the Update
	Applied  *time.Time   `json:"applied,omitempty"` // workflow time it took effect
	Set      []Assignment `json:"set,omitempty"`     // a set's assignments
	Changes  []Change     `json:"changes,omitempty"` // a set's fields, old and new
	Note     string       `json:"note,omitempty"`
	By       string       `json:"by,omitempty"`
}

// Label is the event as the report's marker and `temper status` show it.
func (e ControlEvent) Label() string {
	s := e.Event
	if len(e.Changes) > 0 {
		var parts []string
		for _, c := range e.Changes {
			parts = append(parts, fmt.Sprintf("%s %s→%s", c.Key, c.Old, c.New))
		}
		s += " " + strings.Join(parts, ", ")
	}
	if e.Note != "" {
		s += " (" + e.Note + ")"
	}
	return s
}

// PauseState says where and since when a phase is paused.
type PauseState struct {
	At    int       `json:"at"`
	Since time.Time `json:"since"`
	Note  string    `json:"note,omitempty"`
	By    string    `json:"by,omitempty"`
}

// SteerState is a phase's steering: what was applied (the effective config is the phase's config
// with Applied set over it, in order), what waits for its boundary, and whether it is paused. It
// travels in the loop state across continue-as-new and into back-tracking branches.
type SteerState struct {
	Seq     int            `json:"seq"` // control events numbered so far
	Applied []Assignment   `json:"applied,omitempty"`
	Pending []ControlEvent `json:"pending,omitempty"`
	Log     []ControlEvent `json:"log,omitempty"` // applied events, in order
	Paused  *PauseState    `json:"paused,omitempty"`
}

// SteerStatus answers SteerQuery: a phase's live state.
type SteerStatus struct {
	Workflow string `json:"workflow"`
	Phase    string `json:"phase"`
	Kind     string `json:"kind"`
	Unit     string `json:"unit"`
	Done     int    `json:"done"` // iterations or steps completed
	Next     int    `json:"next"` // the boundary a change accepted now applies at
	// Elsewhere is the back-tracking branch workflow that runs the rest of the phase (query it).
	Elsewhere string             `json:"elsewhere,omitempty"`
	Paused    *PauseState        `json:"paused,omitempty"`
	Pending   []ControlEvent     `json:"pending,omitempty"`
	Log       []ControlEvent     `json:"log,omitempty"`
	Live      map[string]float64 `json:"live,omitempty"` // the live fields' current values
}

// ForwardInput is what ForwardName sends: the Update to the phase workflow Workflow (or its newest branch).
type ForwardInput struct {
	Workflow string       `json:"workflow"`
	Update   string       `json:"update"`
	Request  SteerRequest `json:"request"`
}

// liveField is a config field `temper set` may change while its phase runs. ok says whether a
// value is allowed (allowed says which in words); boundary fields (iterations, steps) must also not
// be behind the boundary the change applies at.
type liveField struct {
	key      string // as `temper set` takes it; <label> stands for a reward verifier's label
	explain  string // as `temper config explain` prints it ("" = key)
	integer  bool
	boundary bool
	ok       func(float64) bool
	allowed  string
}

func positive(v float64) bool    { return v > 0 }
func nonNegative(v float64) bool { return v >= 0 }
func anyFinite(float64) bool     { return true }

const labelKey = "<label>"

// rlLive are the live fields of the RL kinds; chunkedLive those of the chunked training kinds.
var (
	rlLive = []liveField{
		{key: "optimizer.lr", ok: func(v float64) bool { return v > 0 && v < 10 }, allowed: "0 < lr < 10 (the peak: the schedule goes on from the current iteration)"},
		{key: "loss.kl_beta", ok: nonNegative, allowed: ">= 0 (0: off)"},
		{key: "loss.clip_low", ok: func(v float64) bool { return v >= 0 && v < 1 }, allowed: "0 <= clip_low < 1"},
		{key: "loss.clip_high", ok: nonNegative, allowed: ">= 0"},
		{key: "loss.entropy_coef", ok: anyFinite, allowed: "a finite number (0: off)"},
		{key: "temperature", ok: positive, allowed: "> 0 (rollouts sample)"},
		{key: "sampling.top_p", ok: func(v float64) bool { return v >= 0 && v <= 1 }, allowed: "0 <= top_p <= 1 (0 or 1: off)"},
		{key: "sampling.top_k", integer: true, ok: nonNegative, allowed: "an integer >= 0 (0: off)"},
		{key: "sampling.min_p", ok: func(v float64) bool { return v >= 0 && v <= 1 }, allowed: "0 <= min_p <= 1 (0: off)"},
		{key: "sampling.repetition_penalty", ok: nonNegative, allowed: "> 0 (0 or 1: off)"},
		{key: "reward.verifiers." + labelKey + ".weight", explain: "reward.verifiers[].weight", ok: positive,
			allowed: "> 0; <label> is a verifier's as, else its name"},
		{key: "eval_every", integer: true, ok: nonNegative, allowed: "an integer >= 0 (0: only at the end)"},
		{key: "iterations", integer: true, boundary: true, ok: positive, allowed: "an integer >= 1"},
		{key: "max_seconds", ok: nonNegative, allowed: ">= 0 (0: no limit)"},
		{key: "backtrack.tolerance", ok: nonNegative, allowed: ">= 0"},
		{key: "backtrack.budget", integer: true, ok: nonNegative, allowed: "an integer >= 0"},
		{key: "backtrack.lr_factor", ok: positive, allowed: "> 0"},
		{key: "backtrack.kl_factor", ok: positive, allowed: "> 0"},
	}
	chunkedLive = []liveField{
		{key: "optimizer.lr", ok: func(v float64) bool { return v > 0 && v < 10 }, allowed: "0 < lr < 10 (the peak: the schedule goes on from the current step)"},
		{key: "steps", integer: true, boundary: true, ok: positive, allowed: "an integer >= 1"},
		{key: "max_seconds", ok: nonNegative, allowed: ">= 0 (0: no limit)"},
		{key: "eval.every_chunks", integer: true, ok: nonNegative, allowed: "an integer >= 0 (0: only before and after)"},
	}
)

// chunkShaped is implemented by the chunked kinds' configs: the shape the driver reads.
type chunkShaped interface {
	chunkShape() (ChunkSpec, EvalCadence)
}

func (c *TrainConfig) chunkShape() (ChunkSpec, EvalCadence) { return c.ChunkSpec, c.Eval.EvalCadence }
func (c *PrefConfig) chunkShape() (ChunkSpec, EvalCadence)  { return c.ChunkSpec, c.Eval.EvalCadence }
func (c *RewardModelConfig) chunkShape() (ChunkSpec, EvalCadence) {
	return c.ChunkSpec, c.Eval.EvalCadence
}
func (c *DistillConfig) chunkShape() (ChunkSpec, EvalCadence) { return c.ChunkSpec, c.Eval.EvalCadence }

// liveFields are kind's live fields and the unit of its boundaries; none for kinds that do not steer.
func liveFields(kind string) ([]liveField, string) {
	k, ok := LookupPhase(kind)
	if !ok {
		return nil, ""
	}
	switch k.NewConfig().(type) {
	case *RLConfig:
		if kind == KindOnlineDPO { // its loss is under preference
			return slices.DeleteFunc(slices.Clone(rlLive), func(f liveField) bool { return strings.HasPrefix(f.key, "loss.") }), "iteration"
		}
		return rlLive, "iteration"
	case chunkShaped:
		return chunkedLive, "step"
	}
	return nil, ""
}

// LiveFields lists the keys `temper set` takes for kind, with their allowed values (nil: the kind
// takes no live changes).
func LiveFields(kind string) [][2]string {
	fields, _ := liveFields(kind)
	var out [][2]string
	for _, f := range fields {
		out = append(out, [2]string{f.key, f.allowed})
	}
	return out
}

// liveExplainPaths maps the config paths `temper config explain` prints to the live fields' help.
func liveExplainPaths(kind string) map[string]string {
	fields, _ := liveFields(kind)
	out := map[string]string{}
	for _, f := range fields {
		p := f.explain
		if p == "" {
			p = f.key
		}
		out[p] = f.allowed
	}
	return out
}

func liveKeys(fields []liveField) string {
	var keys []string
	for _, f := range fields {
		keys = append(keys, f.key)
	}
	return strings.Join(keys, ", ")
}

// changePlan checks the assignments sets of a set for phase (kind, raw config, what was applied
// and is pending) applying at boundary at (at < 0: no boundary check, the pipeline's static check)
// and returns them resolved, with each field's value before and after.
func changePlan(phase, kind string, raw json.RawMessage, before []Assignment, sets []string, at int) ([]Assignment, []Change, error) {
	fields, unit := liveFields(kind)
	if len(fields) == 0 {
		return nil, nil, fmt.Errorf("set: a %s phase takes no live changes (the RL and chunked training kinds do)", kind)
	}
	if len(sets) == 0 {
		return nil, nil, fmt.Errorf("set: no key=value given (live fields of %s: %s)", kind, liveKeys(fields))
	}
	cur, err := effectiveConfig(phase, kind, raw, before)
	if err != nil {
		return nil, nil, err
	}
	var as []Assignment
	var changes []Change
	seen := map[string]bool{}
	for _, s := range sets {
		a, old, err := resolveAssignment(cur, fields, s)
		if err != nil {
			return nil, nil, err
		}
		if seen[a.Path] {
			return nil, nil, fmt.Errorf("set %s: %s is set twice", s, a.Key)
		}
		seen[a.Path] = true
		if f := fieldOf(fields, a.Key); f.boundary && at >= 0 && a.Value < float64(at) {
			return nil, nil, &config.FieldError{Path: a.Key, Msg: fmt.Sprintf("%s: want >= %d: the change applies after %s %d", num(a), at, unit, at)}
		}
		as = append(as, a)
		changes = append(changes, Change{Key: a.Key, Old: old, New: num(a)})
	}
	if _, err := effectiveConfig(phase, kind, raw, append(append([]Assignment{}, before...), as...)); err != nil {
		return nil, nil, fmt.Errorf("set %s: %w", strings.Join(sets, " "), err)
	}
	return as, changes, nil
}

// resolveAssignment parses "key=value" against the live fields and the current config cur (a
// verifier's label becomes its index) and returns it with the field's current value.
func resolveAssignment(cur any, fields []liveField, s string) (Assignment, string, error) {
	key, val, ok := strings.Cut(s, "=")
	key, val = strings.TrimSpace(key), strings.TrimSpace(val)
	if !ok || key == "" {
		return Assignment{}, "", fmt.Errorf("set %q: want key=value", s)
	}
	path, pattern := key, key
	if rest, ok := strings.CutPrefix(key, "reward.verifiers."); ok {
		label, tail, _ := strings.Cut(rest, ".")
		pattern = "reward.verifiers." + labelKey + "." + tail
		if tail == "weight" {
			i, err := verifierIndex(cur, label)
			if err != nil {
				return Assignment{}, "", &config.FieldError{Path: key, Msg: err.Error()}
			}
			path = fmt.Sprintf("reward.verifiers.%d.weight", i)
		}
	}
	f := fieldOf(fields, pattern)
	if f.key == "" {
		msg := fmt.Sprintf("not a live field: change it by forking the run (temper fork); live fields: %s", liveKeys(fields))
		return Assignment{}, "", &config.FieldError{Path: key, Msg: msg}
	}
	v, err := strconv.ParseFloat(val, 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return Assignment{}, "", &config.FieldError{Path: key, Msg: fmt.Sprintf("%q is not a number; want %s", val, f.allowed)}
	case f.integer && (v != math.Trunc(v) || math.Abs(v) > 1e9):
		return Assignment{}, "", &config.FieldError{Path: key, Msg: fmt.Sprintf("%s: want %s", val, f.allowed)}
	case !f.ok(v):
		return Assignment{}, "", &config.FieldError{Path: key, Msg: fmt.Sprintf("%s: want %s", val, f.allowed)}
	}
	a := Assignment{Key: key, Path: path, Value: v, Integer: f.integer}
	old, _ := treeValue(cur, strings.Split(path, "."))
	if w, _ := old.(float64); pattern != key && w == 0 {
		old = 1.0 // a verifier's weight 0 means 1 (verify.Component)
	}
	return a, jsonText(old), nil
}

func fieldOf(fields []liveField, key string) liveField {
	for _, f := range fields {
		if f.key == key {
			return f
		}
	}
	return liveField{}
}

// verifierIndex finds the reward verifier labelled label in the config tree cur.
func verifierIndex(cur any, label string) (int, error) {
	vs, _ := treeValue(cur, []string{"reward", "verifiers"})
	list, _ := vs.([]any)
	var labels []string
	for i, v := range list {
		m, _ := v.(map[string]any)
		l, _ := m["as"].(string)
		if l == "" {
			l, _ = m["name"].(string)
		}
		if l == label {
			return i, nil
		}
		labels = append(labels, l)
	}
	if len(labels) == 0 {
		return 0, fmt.Errorf("the phase's reward names no verifiers (it scores with the task's own checker), so there is no weight to change")
	}
	return 0, fmt.Errorf("no verifier labelled %q (labels: %s)", label, strings.Join(labels, ", "))
}

// effectiveConfig is the phase's config with the assignments set over it, decoded over the kind's
// defaults and validated, as a generic tree (every field present).
func effectiveConfig(phase, kind string, raw json.RawMessage, as []Assignment) (any, error) {
	cfg, err := decodeEffective(phase, kind, raw, as)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var tree any
	err = json.Unmarshal(b, &tree)
	return tree, err
}

// decodeEffective is the phase's config with the assignments set over it, decoded and validated.
func decodeEffective(phase, kind string, raw json.RawMessage, as []Assignment) (PhaseConfig, error) {
	if len(as) == 0 {
		return DecodePhaseConfig(kind, raw, phase)
	}
	var tree any = map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		t, err := config.ParseTree(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", phase, err)
		}
		tree = t
	}
	for _, a := range as {
		var v any = a.Value
		if a.Integer {
			v = int64(a.Value)
		}
		if err := config.SetPath(tree, strings.Split(a.Path, "."), v); err != nil {
			return nil, fmt.Errorf("%s.%s: %w", phase, a.Key, err)
		}
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return nil, err
	}
	return DecodePhaseConfig(kind, b, phase)
}

// treeValue reads path from a config tree.
func treeValue(tree any, path []string) (any, bool) {
	cur := tree
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			idx, err := strconv.Atoi(p)
			if err != nil || idx < 0 || idx >= len(c) {
				return nil, false
			}
			cur = c[idx]
		default:
			return nil, false
		}
	}
	return cur, true
}

// liveValues are the current values of the live fields of a config tree (a verifier weight under
// its label).
func liveValues(kind string, tree any) map[string]float64 {
	fields, _ := liveFields(kind)
	out := map[string]float64{}
	for _, f := range fields {
		if !strings.Contains(f.key, labelKey) {
			if v, ok := treeValue(tree, strings.Split(f.key, ".")); ok {
				if x, ok := v.(float64); ok {
					out[f.key] = x
				}
			}
			continue
		}
		vs, _ := treeValue(tree, []string{"reward", "verifiers"})
		list, _ := vs.([]any)
		for _, v := range list {
			m, _ := v.(map[string]any)
			l, _ := m["as"].(string)
			if l == "" {
				l, _ = m["name"].(string)
			}
			w, _ := m["weight"].(float64)
			if w == 0 {
				w = 1 // verify.Component: 0 means 1
			}
			out[strings.Replace(f.key, labelKey, l, 1)] = w
		}
	}
	return out
}

func num(a Assignment) string {
	if a.Integer {
		return strconv.FormatInt(int64(a.Value), 10)
	}
	return strconv.FormatFloat(a.Value, 'g', -1, 64)
}

func jsonText(v any) string {
	if v == nil {
		return "-"
	}
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
