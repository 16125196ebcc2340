package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/workflows"
)

// dataFile is one dataset a phase names: its config path, URI, and whether its lines are preference
// examples ({prompt, chosen, rejected} or {prompt, completion, label}) rather than examples.
type dataFile struct {
	path, uri string
	pref      bool
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
	pref := false
	switch c := cfg.(type) {
	case *workflows.TrainConfig:
		trainURI, heldURI = c.Data.Train, c.Data.Heldout
	case *workflows.RLConfig:
		trainURI, heldURI = c.Data.Train, c.Data.Heldout
	case *workflows.PrefConfig:
		trainURI, heldURI, pref = c.Data.Train, c.Data.Heldout, true
	case *workflows.RewardModelConfig:
		trainURI, heldURI, pref = c.Data.Train, c.Data.Heldout, true
	}
	var out []dataFile
	for _, f := range []dataFile{{prefix + "train", trainURI, pref}, {prefix + "heldout", heldURI, pref}} {
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
			if f.pref {
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
