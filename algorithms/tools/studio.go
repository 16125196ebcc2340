package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/temperml/temper/algorithms/tasks"
)

// Studio names the creative studio's engines, each a tool: the downstream services the `route`
// task's policy routes a request to.
var Studio = []string{"image", "video", "audio", "layout"}

// studioSchemas are the engines' parameters. Values the studio does not serve (a style it has no
// model for, a 20-minute video) are refused by the schema, before the engine is called.
var studioSchemas = map[string]string{
	"image": `{"type":"object","properties":{"subject":{"type":"string","minLength":1,"maxLength":200},
		"style":{"enum":["watercolor","pixel art","photo","oil painting","sketch","3d render"]}},"required":["subject","style"],"additionalProperties":false}`,
	"video": `{"type":"object","properties":{"subject":{"type":"string","minLength":1,"maxLength":200},
		"seconds":{"type":"integer","minimum":1,"maximum":600}},"required":["subject","seconds"],"additionalProperties":false}`,
	"audio": `{"type":"object","properties":{"mood":{"enum":["calm","upbeat","dark","epic","playful"]},
		"seconds":{"type":"integer","minimum":1,"maximum":600}},"required":["mood","seconds"],"additionalProperties":false}`,
	"layout": `{"type":"object","properties":{"format":{"enum":["poster","flyer","banner","card"]},
		"title":{"type":"string","minLength":1,"maxLength":120}},"required":["format","title"],"additionalProperties":false}`,
}

// StudioTool is one studio engine as a tool: it queues the job and returns its reference
// (tasks.RouteJob of the engine and its parameters). Nothing is rendered: the reference is what the
// route task checks.
func StudioTool(engine string) (Tool, error) {
	schema, ok := studioSchemas[engine]
	if !ok {
		return Tool{}, fmt.Errorf("tools: unknown studio engine %q: allowed %s", engine, strings.Join(Studio, ", "))
	}
	return Tool{
		Name:        engine,
		Description: "queue a job on the studio's " + engine + " engine; returns the job's reference",
		Schema:      json.RawMessage(schema),
		Run: func(_ context.Context, args json.RawMessage) (string, error) {
			var params map[string]any
			if err := json.Unmarshal(args, &params); err != nil {
				return "", err
			}
			return tasks.RouteJob(engine, params), nil
		},
	}, nil
}
