package imageproc

import (
	"errors"
	"fmt"
)

// Fetcher reads the bytes of a file:// or gs:// reference: the activity's file system or store
// client. It should read at most maxBytes+1 bytes, so that an object over the limit is refused
// without being read whole, and return an error wrapping fs.ErrNotExist for a missing object.
type Fetcher func(ref Ref, maxBytes int64) ([]byte, error)

// Load returns the encoded bytes of an image part: a data: URI's own bytes, or what fetch reads.
// Errors are *FieldError naming the part's field and reference
// ("imageproc: chosen[0].image: file:///data/a.png: open …: no such file or directory").
func Load(p Part, fetch Fetcher, lim Limits) ([]byte, error) {
	lim = lim.WithDefaults()
	field := p.Field + ".image"
	if p.Type != PartImage || p.Ref == nil {
		return nil, &FieldError{field, errors.New("not an image part (parse it with ParseContent)")}
	}
	if p.Ref.Scheme == "data" {
		return p.Ref.Data, nil
	}
	if fetch == nil {
		return nil, &FieldError{field, fmt.Errorf("%s: no fetcher for %s references", p.Ref, p.Ref.Scheme)}
	}
	data, err := fetch(*p.Ref, lim.MaxBytes)
	if err != nil {
		return nil, &FieldError{field, fmt.Errorf("%s: %w", p.Ref, err)}
	}
	if int64(len(data)) > lim.MaxBytes {
		return nil, &FieldError{field, fmt.Errorf("%s: more than the limit of %d bytes (limits.max_bytes)", p.Ref, lim.MaxBytes)}
	}
	return data, nil
}

// PreprocessPart loads an image part and preprocesses it, returning its pixels and CacheKey (an
// activity looks the key up in its per-phase cache before calling this, with
// CacheKeyOf(ContentHash(bytes), cfg) once it has the bytes). Errors name the field.
func PreprocessPart(p Part, fetch Fetcher, cfg Config) (Pixels, string, error) {
	data, err := Load(p, fetch, cfg.Limits)
	if err != nil {
		return Pixels{}, "", err
	}
	px, err := Preprocess(data, cfg)
	if err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return Pixels{}, "", err
		}
		return Pixels{}, "", &FieldError{p.Field + ".image", fmt.Errorf("%s: %s", p.Ref, trimPrefix(err))}
	}
	return px, CacheKey(data, cfg), nil
}

func trimPrefix(err error) string {
	s := err.Error()
	const pre = "imageproc: "
	if len(s) > len(pre) && s[:len(pre)] == pre {
		return s[len(pre):]
	}
	return s
}
