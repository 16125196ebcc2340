package verify

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestParseLayoutSaysWhatTheVerifierSays: for malformed layouts ParseLayout's error is the
// verifier's feedback verbatim; for well-formed ones it returns the boxes with their raw objects.
func TestParseLayoutSaysWhatTheVerifierSays(t *testing.T) {
	v, err := NewLayout(json.RawMessage(`{"canvas": {"w": 100, "h": 100}, "ids": ["a"], "tag": "layout"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{
		"", "no tags here", "<layout>not json</layout>", "<layout>{\"boxes\": 3}</layout>",
		"<layout>{\"items\": []}</layout>", "<layout>[1, 2]</layout>", "<layout>a</layout><layout>b</layout>",
		`<layout>[{"id": "a", "x": 1, "y": 1, "w": 2, "h": 2}, {"id": "a", "x": 5, "y": 5, "w": 2, "h": 2}]</layout>`,
		"<layout>[" + strings.Repeat(`{"id": "x"},`, 1100) + `{"id": "y"}]</layout>`,
	} {
		verdict, err := v.Verify(context.Background(), Sample{Completion: c})
		if err != nil {
			t.Fatal(err)
		}
		_, _, perr := ParseLayout(c, "layout")
		if perr == nil || perr.Error() != verdict.Feedback || verdict.Score != 0 {
			t.Errorf("%.60q: ParseLayout %v, verifier %q (score %v)", c, perr, verdict.Feedback, verdict.Score)
		}
	}
	boxes, raw, err := ParseLayout(`{"boxes": [{"id": "t", "role": "title", "x": 1, "y": 2, "w": 3, "h": 4, "text": "Hi"}]}`, "")
	if err != nil || len(boxes) != 1 || boxes[0].ID != "t" || *boxes[0].W != 3 || !strings.Contains(string(raw[0]), `"text": "Hi"`) {
		t.Fatalf("%v %s %v", boxes, raw, err)
	}
}
