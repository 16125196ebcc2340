package ckpt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
)

// Names inside a checkpoint directory.
const (
	ManifestName = "MANIFEST.json"
	StateName    = "state.json"
	ModelName    = "model.safetensors"
	OptimName    = "optimizer.safetensors"
	bestName     = "BEST"
)

var (
	// ErrCorrupt is wrapped by errors for checkpoints whose bytes do not match
	// their manifest (size, sha256, missing file, unreadable manifest).
	ErrCorrupt = errors.New("checkpoint corrupt")
	// ErrNoCheckpoint is wrapped by Latest when no good checkpoint exists.
	ErrNoCheckpoint = errors.New("no checkpoint")
)

// Ref names one committed checkpoint. It is what workflows carry.
type Ref struct {
	URI   string `json:"uri"` // directory URI, ends in "/"
	Run   string `json:"run"`
	Phase string `json:"phase"`
	Step  int64  `json:"step"`
	Best  bool   `json:"best,omitempty"` // set by List
}

// Manifest is MANIFEST.json: written last, its presence is the commit.
type Manifest struct {
	Version int         `json:"version"`
	Run     string      `json:"run"`
	Phase   string      `json:"phase"`
	Step    int64       `json:"step"`
	Writer  string      `json:"writer"` // random id of the writer that committed
	Created time.Time   `json:"created"`
	Files   []FileEntry `json:"files"` // sorted by Name
}

// FileEntry describes one file of a checkpoint.
type FileEntry struct {
	Name string `json:"name"`
	// Object is the key of the bytes relative to the checkpoint directory when it
	// differs from Name: on object stores each writer uploads under its own
	// "w-<id>/" so that a slow or duplicate writer can never overwrite the bytes
	// of a checkpoint another writer committed.
	Object string `json:"object,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

func (f FileEntry) key() string {
	if f.Object != "" {
		return f.Object
	}
	return f.Name
}

// File returns the entry called name.
func (m *Manifest) File(name string) (FileEntry, bool) {
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return FileEntry{}, false
}

// Client reads and writes checkpoints under root URIs. It caches one GCS
// client, created on first use unless Options.GCS injects one. Safe for
// concurrent use.
type Client struct {
	opts Options

	mu    sync.Mutex
	gcs   *storage.Client
	owned bool
}

// New returns a Client.
func New(opts Options) *Client {
	opts = opts.withDefaults()
	return &Client{opts: opts, gcs: opts.GCS}
}

// Close closes the GCS client if this Client created it.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned && c.gcs != nil {
		err := c.gcs.Close()
		c.gcs, c.owned = nil, false
		return err
	}
	return nil
}

// store opens the store for a root location; stores made here never own
// their GCS client, so callers need not close them.
func (c *Client) store(ctx context.Context, loc location) (Store, error) {
	if loc.scheme == "file" {
		return newFileStore(loc.path), nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gcs == nil {
		g, err := storage.NewClient(ctx)
		if err != nil {
			return nil, fmt.Errorf("ckpt: open %s: storage client: %w", loc, err)
		}
		c.gcs, c.owned = g, true
	}
	return newGCSStore(c.gcs, false, loc.bucket, loc.path, c.opts), nil
}

// defaultClient serves the package-level functions the CLI calls.
var defaultClient = New(Options{})

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.=+@:-]{0,199}$`)

// validName checks a run or phase name: one path element that needs no URI escaping.
func validName(kind, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("invalid %s name %q (want [A-Za-z0-9][A-Za-z0-9_.=+@:-]*, at most 200)", kind, s)
	}
	return nil
}

// validFile checks a checkpoint file name: flat, not reserved.
func validFile(name string) error {
	switch {
	case !nameRE.MatchString(name):
		return fmt.Errorf("invalid file name %q (one path element, [A-Za-z0-9][A-Za-z0-9_.=+@:-]*)", name)
	case name == ManifestName || name == bestName:
		return fmt.Errorf("file name %q is reserved", name)
	}
	return nil
}

func phaseKey(run, phase string) string { return "runs/" + run + "/" + phase + "/" }

func stepDir(step int64) string { return fmt.Sprintf("step-%06d", step) }

func stepKey(run, phase string, step int64) string { return phaseKey(run, phase) + stepDir(step) }

var stepRE = regexp.MustCompile(`^step-([0-9]{6,18})$`)

func parseStepDir(s string) (int64, bool) {
	m := stepRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || stepDir(n) != s {
		return 0, false // reject non-canonical forms like step-0000001
	}
	return n, true
}

func refURI(loc location, run, phase string, step int64) string {
	return strings.TrimSuffix(loc.String(), "/") + "/" + stepKey(run, phase, step) + "/"
}

// ckptLoc is a parsed checkpoint URI: <root>/runs/<run>/<phase>/step-NNNNNN/.
type ckptLoc struct {
	root  location
	run   string
	phase string
	step  int64
}

func (l ckptLoc) key() string { return stepKey(l.run, l.phase, l.step) }
func (l ckptLoc) uri() string { return refURI(l.root, l.run, l.phase, l.step) }
func (l ckptLoc) ref() Ref {
	return Ref{URI: l.uri(), Run: l.run, Phase: l.phase, Step: l.step}
}

func parseCkptURI(uri string) (ckptLoc, error) {
	trimmed := strings.TrimRight(uri, "/")
	parts := strings.Split(trimmed, "/")
	if len(parts) < 5 || parts[len(parts)-4] != "runs" {
		return ckptLoc{}, fmt.Errorf("ckpt: %q is not a checkpoint URI (<root>/runs/<run>/<phase>/step-NNNNNN/)", uri)
	}
	n := len(parts)
	step, ok := parseStepDir(parts[n-1])
	if !ok {
		return ckptLoc{}, fmt.Errorf("ckpt: %q is not a checkpoint URI: bad step directory %q", uri, parts[n-1])
	}
	run, phase := parts[n-3], parts[n-2]
	if err := validName("run", run); err != nil {
		return ckptLoc{}, fmt.Errorf("ckpt: %q: %w", uri, err)
	}
	if err := validName("phase", phase); err != nil {
		return ckptLoc{}, fmt.Errorf("ckpt: %q: %w", uri, err)
	}
	rootURI := strings.Join(parts[:n-4], "/")
	if strings.HasSuffix(rootURI, "://") { // "file:///runs/..." leaves "file://"
		rootURI += "/"
	}
	root, err := parseLocation(rootURI)
	if err != nil {
		return ckptLoc{}, err
	}
	return ckptLoc{root: root, run: run, phase: phase, step: step}, nil
}

// readManifest fetches and decodes the manifest of the checkpoint at key.
// A missing manifest wraps ErrNotExist; an undecodable one wraps ErrCorrupt.
func readManifest(ctx context.Context, s Store, key string) (*Manifest, error) {
	rc, err := s.Get(ctx, key+"/"+ManifestName)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("ckpt: read %s: %w", s.URI(key+"/"+ManifestName), err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("ckpt: read %s: %w: %v", s.URI(key+"/"+ManifestName), ErrCorrupt, err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("ckpt: read %s: %w: unknown manifest version %d", s.URI(key+"/"+ManifestName), ErrCorrupt, m.Version)
	}
	for _, f := range m.Files {
		if validFile(f.Name) != nil || (f.Object != "" && validKey(f.Object) != nil) || f.Size < 0 || len(f.SHA256) != 64 {
			return nil, fmt.Errorf("ckpt: read %s: %w: bad file entry %+v", s.URI(key+"/"+ManifestName), ErrCorrupt, f)
		}
	}
	return &m, nil
}
