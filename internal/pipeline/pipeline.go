package pipeline

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workflows"
)

// Load reads a YAML or JSON pipeline file, applies --set overrides, decodes strictly and validates,
// so every error names its file and field before anything starts; home's store is the default store.
func Load(path string, sets []string, home string) (workflows.PipelineInput, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return workflows.PipelineInput{}, usage.Errorf("read pipeline: %v", err)
	}
	return Parse(path, data, sets, home)
}

// Parse is Load of a file's bytes; name is the file's name in messages.
func Parse(name string, data []byte, sets []string, home string) (workflows.PipelineInput, error) {
	var in workflows.PipelineInput
	tree, err := config.ParseTree(data)
	if err != nil {
		return in, usage.Errorf("%s: %v", name, err)
	}
	for _, s := range sets {
		if tree, err = config.Set(tree, s); err != nil {
			return in, usage.Errorf("--set: %v", err)
		}
	}
	if err := config.Decode(tree, &in, ""); err != nil {
		return in, usage.Errorf("%s: %v", name, err)
	}
	if in.State != nil {
		return in, usage.Errorf("%s: state: set by the pipeline itself when it continues as new; remove it", name)
	}
	if in.Store == "" {
		in.Store = DefaultStore(home)
	}
	if err := in.Validate(); err != nil {
		return in, usage.Errorf("%s: %v", name, err)
	}
	if err := checkDataFiles(in); err != nil {
		return in, usage.Errorf("%s: %v", name, err)
	}
	return in, nil
}

var idUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// NewRunID is a workflow ID for a run of the pipeline name: NAME-UTCDATE-RANDOM.
func NewRunID(name string) string {
	if name == "" {
		name = "run"
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s-%s", idUnsafe.ReplaceAllString(name, "-"), time.Now().UTC().Format("20060102-150405"), hex.EncodeToString(b))
}

// DefaultStore is the store of runs that name none: HOME/store, as a file:// URI.
func DefaultStore(home string) string {
	abs, err := filepath.Abs(filepath.Join(home, "store"))
	if err != nil {
		abs = filepath.Join(home, "store")
	}
	return "file://" + abs
}

// Start starts the pipeline workflow with ID id on the workflows' queue.
func Start(ctx context.Context, c client.Client, id string, in workflows.PipelineInput) (client.WorkflowRun, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: workflows.QueueTemper,
		Memo:      map[string]any{"name": in.Name},
	}, workflows.PipelineName, in)
	if err != nil {
		return nil, fmt.Errorf("start pipeline %s: %w", id, err)
	}
	return run, nil
}

// dataFile is one dataset a phase names: its config path, URI, and whether its lines are preference
// examples ({prompt, chosen, rejected} or {prompt, completion, label}) rather than examples.
type dataFile struct {
	path, uri string
	pref      bool
	images    bool // image pairs of a vision reward model (data.ReadImagePairs): parsed, images not read
}

// phaseDataFiles lists the JSONL files a phase's config names. Validate has already decoded every
// config, so a decode error here cannot happen; it is still reported.
func phaseDataFiles(i int, p workflows.PhaseSpec) ([]dataFile, error) {
	prefix := fmt.Sprintf("phases[%d].config.data.", i)
	cfg, err := workflows.DecodePhaseConfig(p.Kind, p.Config, fmt.Sprintf("phases[%d].config", i))
	if err != nil {
		return nil, err
	}
	var trainURI, heldURI string
	pref, images := false, false
	switch c := cfg.(type) {
	case *workflows.TrainConfig:
		trainURI, heldURI = c.Data.Train, c.Data.Heldout
	case *workflows.RLConfig:
		trainURI, heldURI = c.Data.Train, c.Data.Heldout
	case *workflows.PrefConfig:
		trainURI, heldURI, pref = c.Data.Train, c.Data.Heldout, true
	case *workflows.RewardModelConfig:
		trainURI, heldURI, pref, images = c.Data.Train, c.Data.Heldout, true, c.Model.Vision != nil
	}
	var out []dataFile
	for _, f := range []dataFile{{prefix + "train", trainURI, pref, images}, {prefix + "heldout", heldURI, pref, images}} {
		if f.uri != "" {
			out = append(out, f)
		}
	}
	return out, nil
}

// checkDataFiles opens and parses every local (file://) dataset of the pipeline, so that a missing file
// or a malformed line is an error naming the field, file and line before anything starts. gs:// objects
// are read by the workers, which report the same errors when the phase starts.
func checkDataFiles(in workflows.PipelineInput) error {
	for i, p := range in.Phases {
		files, err := phaseDataFiles(i, p)
		if err != nil {
			return err
		}
		for _, f := range files {
			local, ok := strings.CutPrefix(f.uri, "file://")
			if !ok {
				continue
			}
			b, err := os.ReadFile(local)
			if err != nil {
				return fmt.Errorf("%s: %w", f.path, err)
			}
			n := 0
			if f.images {
				var pairs []data.ImagePair
				pairs, err = data.ReadImagePairs(bytes.NewReader(b), local, imageproc.Limits{})
				n = len(pairs)
			} else if f.pref {
				err = tasks.ReadPrefJSONL(bytes.NewReader(b), local, func(int, tasks.PrefExample) error { n++; return nil })
			} else {
				err = tasks.ReadJSONL(bytes.NewReader(b), local, func(int, tasks.Example) error { n++; return nil })
			}
			if err != nil {
				return fmt.Errorf("%s: %w", f.path, err)
			}
			if n == 0 {
				return fmt.Errorf("%s: %s has no examples", f.path, local)
			}
		}
	}
	return nil
}
