package verify

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ParseLayout reads the boxes of a layout completion exactly as the "layout" verifier does (the
// JSON inside <tag>…</tag> when tag is set, else the whole completion or its last fenced JSON
// block; {"boxes": […]} or a bare array; at most 1024 boxes; unique ids), for readers that need
// the layout itself, such as a renderer. A non-nil error's message is the feedback the verifier
// gives for the same completion. raw holds each box's JSON object, for the attributes the
// verifier ignores (role, colour, text).
func ParseLayout(completion, tag string) (boxes []Box, raw []json.RawMessage, err error) {
	text, err := jsonText(completion, tag)
	if err != nil {
		return nil, nil, layoutFeedback("no layout JSON found: %v", err)
	}
	if boxes, err = parseBoxes(text); err != nil {
		return nil, nil, layoutFeedback("layout is not valid JSON boxes: %v", err)
	}
	if len(boxes) > 4*maxBoxes {
		return nil, nil, layoutFeedback("too many boxes (%d)", len(boxes))
	}
	seen := make(map[string]bool, len(boxes))
	for _, b := range boxes {
		if seen[b.ID] {
			return nil, nil, layoutFeedback("box id %s appears more than once", quote(b.ID))
		}
		seen[b.ID] = true
	}
	// The same text decoded the same way, element by element: it cannot fail where Box did.
	if raw, err = decodeBoxes[json.RawMessage](text); err != nil || len(raw) != len(boxes) {
		return nil, nil, layoutFeedback("layout is not valid JSON boxes: %v", err)
	}
	return boxes, raw, nil
}

func layoutFeedback(format string, args ...any) error {
	return errors.New(clip(fmt.Sprintf(format, args...), maxFeedback))
}
