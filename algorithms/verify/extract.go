package verify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// errMalformedTags: tags that open twice, close without opening, or never close.
var errMalformedTags = errors.New("malformed tags")

// tagContents returns the contents of every <name>…</name> pair (ASCII case-insensitive, no
// attributes). Nested, unbalanced or unclosed tags are an error: a model that cannot close its
// own tags does not get the benefit of the doubt.
func tagContents(text, name string) ([]string, error) {
	open, close := "<"+name+">", "</"+name+">"
	var out []string
	start := -1
	for i := 0; i < len(text); i++ {
		if text[i] != '<' {
			continue
		}
		switch {
		case hasFoldPrefix(text[i:], open):
			if start >= 0 {
				return nil, fmt.Errorf("%w: <%s> opened twice", errMalformedTags, name)
			}
			start = i + len(open)
			i += len(open) - 1
		case hasFoldPrefix(text[i:], close):
			if start < 0 {
				return nil, fmt.Errorf("%w: </%s> without <%s>", errMalformedTags, name, name)
			}
			out = append(out, text[start:i])
			start = -1
			i += len(close) - 1
		}
	}
	if start >= 0 {
		return nil, fmt.Errorf("%w: <%s> is never closed", errMalformedTags, name)
	}
	return out, nil
}

func hasFoldPrefix(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// boxedContents returns the argument of every \boxed{…} (or \fbox{…}, or the one-token
// \boxed 5), matching nested braces and skipping escaped ones. An unbalanced box is an error.
func boxedContents(text string) ([]string, error) {
	spans, err := boxSpans(text)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.content
	}
	return out, nil
}

// hashAnswers returns the text after each GSM8K-style "####" marker, up to the end of its line.
func hashAnswers(text string) []string {
	var out []string
	for {
		j := strings.Index(text, "####")
		if j < 0 {
			return out
		}
		rest := strings.TrimLeft(text[j+4:], "#")
		line, _, _ := strings.Cut(rest, "\n")
		if s := strings.TrimSpace(line); s != "" {
			out = append(out, s)
		}
		text = rest
	}
}

func isAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// fencedBlocks returns the bodies of ``` fenced code blocks and their info strings ("python").
// An unclosed last fence runs to the end of the text.
func fencedBlocks(text string) (bodies, langs []string) {
	lines := strings.SplitAfter(text, "\n")
	in := false
	var cur strings.Builder
	lang := ""
	for _, line := range lines {
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "```") {
			if !in {
				in = true
				lang = strings.ToLower(strings.TrimSpace(strings.TrimLeft(trim, "`")))
				cur.Reset()
				continue
			}
			if trim == "```" || strings.Trim(trim, "`") == "" {
				in = false
				bodies = append(bodies, cur.String())
				langs = append(langs, lang)
				continue
			}
		}
		if in {
			cur.WriteString(line)
		}
	}
	if in {
		bodies = append(bodies, cur.String())
		langs = append(langs, lang)
	}
	return bodies, langs
}

// jsonText finds the JSON document in a completion: the content of <tag> when tag is set;
// otherwise the whole text if it parses, else the last ```json (or plain ```) block, else the
// span from the first '{' or '[' to the last matching closer.
func jsonText(text, tag string) (string, error) {
	if tag != "" {
		c, err := tagContents(text, tag)
		if err != nil {
			return "", err
		}
		switch len(c) {
		case 0:
			return "", fmt.Errorf("no <%s>…</%s> found", tag, tag)
		case 1:
			return stripFence(c[0]), nil
		default:
			return "", fmt.Errorf("<%s> appears %d times; expected once", tag, len(c))
		}
	}
	trim := strings.TrimSpace(text)
	if trim == "" {
		return "", errors.New("empty output")
	}
	if json.Valid([]byte(trim)) {
		return trim, nil
	}
	bodies, langs := fencedBlocks(text)
	for i := len(bodies) - 1; i >= 0; i-- {
		if langs[i] == "json" || langs[i] == "" {
			return strings.TrimSpace(bodies[i]), nil
		}
	}
	first := strings.IndexAny(trim, "{[")
	if first >= 0 {
		closer := map[byte]byte{'{': '}', '[': ']'}[trim[first]]
		if last := strings.LastIndexByte(trim, closer); last > first {
			return trim[first : last+1], nil
		}
	}
	return trim, nil
}

func stripFence(s string) string {
	if b, _ := fencedBlocks(s); len(b) == 1 {
		return strings.TrimSpace(b[0])
	}
	return strings.TrimSpace(s)
}

// CodeBlocks returns the bodies of the ``` fenced code blocks of a completion, in order, with
// their lower-cased info strings ("python"). An unclosed last fence runs to the end of the text.
func CodeBlocks(text string) (bodies, langs []string) { return fencedBlocks(text) }
