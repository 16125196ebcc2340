package toolclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/algorithms/tools"
)

// Dispatcher runs one call as the ToolCall workflow id on the tools queue (starting it, or finding
// the one already started or finished under that id) and returns its result. workers implement it
// over a Temporal client.
type Dispatcher interface {
	Call(ctx context.Context, id string, in toolsapi.CallInput) (toolsapi.RunOutput, error)
}

// CallID names one call for its ToolCall workflow: place (the caller's run, phase, iteration,
// episode and turn) and a digest of tool and arguments, so that the same place with other
// arguments (a re-run pipeline ID, say) is another call.
func CallID(place, tool string, args json.RawMessage) string {
	h := sha256.Sum256(append([]byte(tool+"\x00"), args...))
	return place + "." + tool + "-" + hex.EncodeToString(h[:6])
}

// Remote returns the tools.Env.Remote of a role that plays episodes: every call of a long-running
// tool runs through d under the workflow ID CallID(place(ctx), ...), calling beat every few seconds
// while it waits (the caller's own heartbeat). d nil: such calls fail, saying that no tools queue is
// configured here.
func Remote(d Dispatcher, place func(ctx context.Context) string, beat func()) func(tools.Tool) tools.Func {
	return func(t tools.Tool) tools.Func {
		return func(ctx context.Context, args json.RawMessage) (string, error) {
			if d == nil {
				return "", fmt.Errorf("no tools queue configured in this worker to run %s on", t.Name)
			}
			if beat != nil {
				stop := KeepBeating(ctx, 2*time.Second, beat)
				defer stop()
			}
			out, err := d.Call(ctx, CallID(place(ctx), t.Name, args), toolsapi.CallInput{RunInput: toolsapi.RunInput{Tool: t.Name, Args: args}})
			if err != nil {
				return "", err
			}
			if out.Error != "" {
				return "", errors.New(strings.TrimPrefix(out.Error, t.Name+": ")) // the registry prefixes the name again
			}
			return out.Output, nil
		}
	}
}

// KeepBeating calls beat every period until the returned stop is called or ctx ends.
func KeepBeating(ctx context.Context, period time.Duration, beat func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() { close(done); <-finished }
}
