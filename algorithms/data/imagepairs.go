package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/temperml/temper/algorithms/imageproc"
)

// ImagePair is one line of an image preference file: a chosen and a rejected image.
type ImagePair struct {
	ID               string
	Line             int // 1-based line in its file
	Chosen, Rejected imageproc.Part
}

// imagePairFields are the keys an image preference line may hold.
var imagePairFields = []string{"id", "prompt", "chosen", "rejected"}

// maxImagePairLine bounds one JSONL line (a data: URI image inside it included).
const maxImagePairLine = 64 << 20

// ReadImagePairs reads image preference pairs, one JSON object per line:
//
//	{"id": "p1", "chosen": [{"type": "image", "image": "file:///…/a.png"}], "rejected": [{"type": "image", "image": "data:image/png;base64,…"}]}
//
// chosen and rejected are content values (imageproc.ParseContent) holding exactly one image part
// each. A text prompt is refused by name: a vision reward model scores the image alone (text
// conditioning is not implemented). Blank lines are skipped. Errors name the file, the line and
// the field ("pairs.jsonl:3: imageproc: chosen[0].image: data URI: malformed base64: …").
func ReadImagePairs(r io.Reader, name string, lim imageproc.Limits) ([]ImagePair, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxImagePairLine)
	var out []ImagePair
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		p, err := parseImagePair(raw, lim)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		p.Line = line
		if p.ID == "" {
			p.ID = fmt.Sprintf("%s:%d", name, line)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes", name, line+1, maxImagePairLine)
		}
		return nil, fmt.Errorf("%s: read: %w", name, err)
	}
	return out, nil
}

func parseImagePair(raw []byte, lim imageproc.Limits) (ImagePair, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return ImagePair{}, fmt.Errorf("want a JSON object with chosen and rejected images: %w", err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		known := false
		for _, f := range imagePairFields {
			known = known || k == f
		}
		if !known {
			return ImagePair{}, fmt.Errorf("field %q is not read (allowed fields: %s)", k, strings.Join(imagePairFields, ", "))
		}
	}
	var p ImagePair
	if v, ok := fields["id"]; ok {
		if err := json.Unmarshal(v, &p.ID); err != nil {
			return ImagePair{}, fmt.Errorf("id: want a string: %w", err)
		}
	}
	if v, ok := fields["prompt"]; ok {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || s != "" {
			return ImagePair{}, errors.New("prompt: text prompts are not implemented for vision reward models (the image alone is scored); leave prompt out")
		}
	}
	for _, side := range []struct {
		field string
		dst   *imageproc.Part
	}{{"chosen", &p.Chosen}, {"rejected", &p.Rejected}} {
		parts, err := imageproc.ParseContent(fields[side.field], side.field, lim)
		if err != nil {
			return ImagePair{}, err
		}
		imgs := imageproc.Images(parts)
		if len(imgs) != 1 || len(parts) != 1 {
			return ImagePair{}, &imageproc.FieldError{Field: side.field, Err: fmt.Errorf("%d parts with %d images: want exactly one image part ({\"type\": \"image\", \"image\": \"<uri>\"}); text parts are not implemented for vision reward models", len(parts), len(imgs))}
		}
		*side.dst = imgs[0]
	}
	return p, nil
}
