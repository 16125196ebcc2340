package tasks

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
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

// RouteJob is the job reference a studio engine's tool returns for a call: the engine and a digest
// of its parameters as canonical JSON, so that only the right engine called with the request's
// values returns the reference the request's answer names.
func RouteJob(engine string, params map[string]any) string {
	b, _ := json.Marshal(params) // map keys marshal sorted; numbers as JSON writes them
	h := fnv.New32a()
	h.Write([]byte(engine + "\x00"))
	h.Write(b)
	return fmt.Sprintf("%s job %08x", engine, h.Sum32())
}

// Route is the router posed as an agentic task: the policy calls the studio engine that serves the
// request (tools image, video, audio, layout, each with a JSON Schema for its parameters), reads the
// job reference the engine returns and answers with it. Only the right engine with the request's
// exact values returns the expected reference (RouteJob), so the answer checks the call.
type Route struct{}

func init() { register(Route{}) }

// Name implements Task.
func (Route) Name() string { return "route" }

// Doc implements Task.
func (Route) Doc() string {
	return "the intent router as tool calls: agentic (tools: image, video, audio, layout); answer with the job reference the right engine returns"
}

// Example implements Task.
func (Route) Example(rng *rand.Rand) Example {
	ex := Router{}.Example(rng)
	var c routeCall
	_ = json.Unmarshal([]byte(ex.Answer), &c) // Router's answers are its own JSON
	job := RouteJob(c.Engine, c.Params)
	return Example{Prompt: ex.Prompt, Completion: job, Answer: job}
}

// Check implements Task.
func (Route) Check(ex Example, completion string) (bool, string) {
	got := FirstLine(completion)
	if got == ex.Answer {
		return true, ""
	}
	if got == "" {
		return false, "the answer is missing: call the engine that serves the request, then answer with the job reference it returns"
	}
	return false, fmt.Sprintf("%q is not this request's job: call the engine that serves it with the request's values and copy its reply", truncate(got, 40))
}

// Tools implements Agentic.
func (Route) Tools() []string { return []string{"image", "video", "audio", "layout"} }

// Demonstration implements Agentic: the right engine called with the request's values, its job
// reference copied as the answer.
func (Route) Demonstration(ex Example) Example {
	c := routeOf(ex.Prompt)
	return oneCallDemo(ex, c.Engine, c.Params)
}

// routeOf reads the call a Router request asks for back from its text: every value of a request
// comes from the fixed vocabularies above or is its one number, and each engine's templates name it.
func routeOf(prompt string) routeCall {
	req := strings.TrimSuffix(strings.TrimPrefix(prompt, "route: "), "\n")
	find := func(xs []string) string {
		best := ""
		for _, x := range xs {
			if strings.Contains(req, x) && len(x) > len(best) {
				best = x
			}
		}
		return best
	}
	number := func() int {
		n := 0
		for _, f := range strings.FieldsFunc(req, func(r rune) bool { return r < '0' || r > '9' }) {
			n, _ = strconv.Atoi(f)
		}
		return n
	}
	switch {
	case strings.Contains(req, "music") || strings.Contains(req, "soundtrack"):
		return routeCall{"audio", map[string]any{"mood": find(moods), "seconds": number()}}
	case strings.Contains(req, "video") || strings.Contains(req, "animate"):
		return routeCall{"video", map[string]any{"subject": find(subjects), "seconds": number()}}
	case find(formats) != "" && find(titles) != "":
		return routeCall{"layout", map[string]any{"format": find(formats), "title": find(titles)}}
	}
	return routeCall{"image", map[string]any{"subject": find(subjects), "style": find(styles)}}
}
