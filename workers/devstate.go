package workers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// DevState is what a running `temper dev` or `temper demo` leaves in HOME/dev.json: the address its
// embedded server listens on and its Web UI's base URL. Client commands read it so that, without
// --temporal or --ui, they reach the server that is actually running and print links to the UI port it
// actually serves (not the default ports).
type DevState struct {
	Temporal string `json:"temporal"`
	UI       string `json:"ui"` // "" when the server runs without a UI
	PID      int    `json:"pid"`
}

// DevStatePath is HOME/dev.json.
func DevStatePath(home string) string { return filepath.Join(home, "dev.json") }

// WriteDevState writes st's DevState to HOME/dev.json and returns its path.
func WriteDevState(home string, st *Stack) (string, error) {
	b, _ := json.Marshal(DevState{Temporal: st.Address, UI: st.UIURL, PID: os.Getpid()})
	p := DevStatePath(home)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

// ReadDevState returns the state of a `temper dev` running on HOME, if its server still answers (a
// dev.json left by a killed process is ignored).
func ReadDevState(home string) (DevState, bool) {
	var ds DevState
	b, err := os.ReadFile(DevStatePath(home))
	if err != nil || json.Unmarshal(b, &ds) != nil || ds.Temporal == "" || !Reachable(ds.Temporal) {
		return DevState{}, false
	}
	return ds, true
}
