package imageproc

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"
)

// Ref is a parsed image reference from a data file.
type Ref struct {
	// Scheme is "file", "gs" or "data".
	Scheme string
	// Path is the absolute file path (file) or the object name (gs).
	Path string
	// Bucket is the bucket (gs).
	Bucket string
	// MediaType is image/png or image/jpeg (data).
	MediaType string
	// Data holds the decoded bytes of a data: URI; fetching file and gs references is the caller's.
	Data []byte
}

// String is the reference as a URI (a data: URI is shortened, its bytes are not repeated).
func (r Ref) String() string {
	switch r.Scheme {
	case "file":
		return "file://" + r.Path
	case "gs":
		return "gs://" + r.Bucket + "/" + r.Path
	}
	return fmt.Sprintf("data:%s;base64,… (%d bytes)", r.MediaType, len(r.Data))
}

const allowedRefs = "file:///absolute/path, gs://bucket/object, data:image/png;base64,… or data:image/jpeg;base64,…"

// ParseRef validates an image reference: file:///abs/path (percent-escapes decoded; host empty
// or localhost), gs://bucket/object, or a base64 data: URI of a PNG or JPEG (decoded into
// Ref.Data, at most lim.MaxBytes, and its magic bytes checked against the declared type). Other
// schemes (http, https, relative paths) are refused with the allowed forms.
func ParseRef(s string, lim Limits) (Ref, error) {
	lim = lim.WithDefaults()
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok || scheme == "" || strings.ContainsAny(scheme, "/.\\ ") {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: not a URI; want %s", quoteClip(s), allowedRefs)
	}
	switch strings.ToLower(scheme) {
	case "file":
		return parseFileRef(s, rest)
	case "gs":
		return parseGSRef(s, rest)
	case "data":
		return parseDataRef(rest, lim)
	}
	return Ref{}, fmt.Errorf("imageproc: image reference %s: scheme %q is not supported; want %s", quoteClip(s), scheme, allowedRefs)
}

func parseFileRef(s, rest string) (Ref, error) {
	hostPath, ok := strings.CutPrefix(rest, "//")
	if !ok {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: want file:///absolute/path", quoteClip(s))
	}
	host, p, _ := strings.Cut(hostPath, "/")
	if host != "" && host != "localhost" {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: file URI with host %q; want file:///absolute/path", quoteClip(s), host)
	}
	if strings.ContainsAny(p, "?#") {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: a file URI has no query or fragment", quoteClip(s))
	}
	p, err := unescapePath(p)
	if err != nil {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: %w", quoteClip(s), err)
	}
	if p == "" || strings.HasSuffix(p, "/") {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: names a directory, want a file", quoteClip(s))
	}
	p = path.Clean("/" + p)
	if p == "/" {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: names a directory, want a file", quoteClip(s))
	}
	return Ref{Scheme: "file", Path: p}, nil
}

func parseGSRef(s, rest string) (Ref, error) {
	bo, ok := strings.CutPrefix(rest, "//")
	bucket, object, ok2 := strings.Cut(bo, "/")
	if !ok || !ok2 || object == "" || strings.HasSuffix(object, "/") {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: want gs://bucket/object", quoteClip(s))
	}
	if !validBucket(bucket) {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: bucket %q: want 3-63 characters of a-z, 0-9, '-', '_', '.', starting and ending with a letter or digit", quoteClip(s), bucket)
	}
	if strings.ContainsAny(object, "\x00\r\n#?") {
		return Ref{}, fmt.Errorf("imageproc: image reference %s: object name has a control character, '#' or '?'", quoteClip(s))
	}
	return Ref{Scheme: "gs", Bucket: bucket, Path: object}, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, c := range b {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || i == len(b)-1 || (c != '-' && c != '_' && c != '.')) {
			return false
		}
	}
	return true
}

var mediaFormats = map[string]string{"image/png": FormatPNG, "image/jpeg": FormatJPEG}

func parseDataRef(rest string, lim Limits) (Ref, error) {
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return Ref{}, fmt.Errorf("imageproc: data URI: no ',' before the data; want data:image/png;base64,<data>")
	}
	media, enc, _ := strings.Cut(meta, ";")
	media = strings.ToLower(strings.TrimSpace(media))
	format, known := mediaFormats[media]
	if !known {
		return Ref{}, fmt.Errorf("imageproc: data URI: media type %q: allowed values: image/png, image/jpeg", media)
	}
	if enc != "base64" {
		return Ref{}, fmt.Errorf("imageproc: data URI: %q: want exactly data:%s;base64,<data> (no other parameters; only base64 is accepted)", "data:"+meta, media)
	}
	// 3 bytes per 4 characters: refuse before decoding what would exceed the limit.
	if int64(len(payload))/4*3 > lim.MaxBytes {
		return Ref{}, fmt.Errorf("imageproc: data URI: %d base64 characters decode to more than the limit of %d bytes (limits.max_bytes)", len(payload), lim.MaxBytes)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return Ref{}, fmt.Errorf("imageproc: data URI: malformed base64: %w", err)
	}
	if got := Sniff(data); got != format {
		if got == "" {
			got = "unknown"
		}
		return Ref{}, fmt.Errorf("imageproc: data URI: declared %s but the data is %s", media, got)
	}
	return Ref{Scheme: "data", MediaType: media, Data: data}, nil
}

// unescapePath decodes %XX escapes (RFC 3986); a malformed escape or an escaped NUL is an error.
func unescapePath(s string) (string, error) {
	if !strings.Contains(s, "%") {
		if strings.ContainsRune(s, 0) {
			return "", fmt.Errorf("path has a NUL byte")
		}
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
			return "", fmt.Errorf("malformed percent-escape at byte %d", i)
		}
		c := byte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		if c == 0 {
			return "", fmt.Errorf("path has an escaped NUL byte")
		}
		b.WriteByte(c)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// quoteClip quotes a reference for an error message, shortened (a data: URI can be megabytes).
func quoteClip(s string) string {
	const n = 80
	if len(s) > n {
		return fmt.Sprintf("%q…", s[:n])
	}
	return fmt.Sprintf("%q", s)
}
