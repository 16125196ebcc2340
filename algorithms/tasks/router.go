package tasks

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
)

// Router maps a creator's request to the engine that serves it and its parameters, as JSON:
// "make a 10 second video of a fox running" → {"engine":"video","params":{"seconds":10,"subject":"a fox running"}}.
// Engines: image, video, audio, layout. The answer is canonical JSON (keys sorted); Check compares parsed
// values, so key order and spacing do not matter but every value does.
type Router struct{}

func init() { register(Router{}) }

// Name implements Task.
func (Router) Name() string { return "router" }

// Doc implements Task.
func (Router) Doc() string {
	return "intent router: creator request → {engine: image|video|audio|layout, params} as JSON"
}

var (
	subjects = []string{"a fox running", "a red bicycle", "the city at night", "a cat on a sofa", "two robots dancing",
		"a mountain lake", "a bowl of ramen", "an old lighthouse", "a paper boat", "a snowy forest"}
	styles  = []string{"watercolor", "pixel art", "photo", "oil painting", "sketch", "3d render"}
	moods   = []string{"calm", "upbeat", "dark", "epic", "playful"}
	formats = []string{"poster", "flyer", "banner", "card"}
	titles  = []string{"Summer Sale", "Open Day", "Night Market", "Book Club", "Jazz Evening", "Grand Opening"}
)

type routeCall struct {
	Engine string         `json:"engine"`
	Params map[string]any `json:"params"`
}

// Example implements Task.
func (Router) Example(rng *rand.Rand) Example {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	var req string
	var call routeCall
	switch rng.IntN(4) {
	case 0:
		s, st := pick(subjects), pick(styles)
		req = fmt.Sprintf(pick([]string{"draw %s in %s style", "an image of %s, %s", "picture: %s (%s)"}), s, st)
		call = routeCall{"image", map[string]any{"subject": s, "style": st}}
	case 1:
		s, n := pick(subjects), 5*(1+rng.IntN(12))
		req = pick([]string{
			fmt.Sprintf("make a %d second video of %s", n, s),
			fmt.Sprintf("video, %d s: %s", n, s),
			fmt.Sprintf("animate %s for %d seconds", s, n),
		})
		call = routeCall{"video", map[string]any{"subject": s, "seconds": n}}
	case 2:
		m, n := pick(moods), 10*(1+rng.IntN(18))
		req = pick([]string{
			fmt.Sprintf("compose %s music for %d seconds", m, n),
			fmt.Sprintf("%d seconds of %s music", n, m),
			fmt.Sprintf("soundtrack: %s, %d s", m, n),
		})
		call = routeCall{"audio", map[string]any{"mood": m, "seconds": n}}
	default:
		f, t := pick(formats), pick(titles)
		req = fmt.Sprintf(pick([]string{"design a %s titled \"%s\"", "layout a %s: %s", "make a %s for \"%s\""}), f, t)
		call = routeCall{"layout", map[string]any{"format": f, "title": t}}
	}
	b, _ := json.Marshal(call) // map keys marshal sorted: canonical
	return Example{Prompt: "route: " + req + "\n", Completion: string(b), Answer: string(b)}
}

// Check implements Task.
func (Router) Check(ex Example, completion string) (bool, string) {
	got := FirstLine(completion)
	var want, have any
	if err := json.Unmarshal([]byte(ex.Answer), &want); err != nil {
		return false, "reference answer is not JSON"
	}
	if err := json.Unmarshal([]byte(got), &have); err != nil {
		return false, "output is not valid JSON: write one object {\"engine\": ..., \"params\": {...}}"
	}
	if reflect.DeepEqual(want, have) {
		return true, ""
	}
	hm, _ := have.(map[string]any)
	wm := want.(map[string]any)
	if hm == nil || hm["engine"] != wm["engine"] {
		return false, fmt.Sprintf("wrong engine: this request needs %q", wm["engine"])
	}
	return false, "right engine, wrong params: copy the subject, style, mood, format, title or length from the request"
}
