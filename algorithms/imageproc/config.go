package imageproc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Resampling filters, numbered as Pillow's PIL.Image.Resampling (the "resample" field of
// preprocessor_config.json).
const (
	Nearest  = 0
	Lanczos  = 1
	Bilinear = 2
	Bicubic  = 3
	Box      = 4
	Hamming  = 5
)

var filterNames = map[int]string{Lanczos: "lanczos", Bilinear: "bilinear", Bicubic: "bicubic", Box: "box", Hamming: "hamming"}

// allowedFilters lists the implemented filters for error messages.
const allowedFilters = "1 (lanczos), 2 (bilinear), 3 (bicubic), 4 (box), 5 (hamming)"

// Default limits. 40 megapixels (about 6300×6300) decode to 160 MB of RGBA; the byte limit keeps a
// data: URI or an object read from the store well below what a worker holds.
const (
	DefaultMaxPixels = 40_000_000
	DefaultMaxBytes  = 32 << 20
	maxSide          = 4096 // largest target size accepted in a processor config
)

// Limits bound what an untrusted image may cost. Zero fields take the defaults.
type Limits struct {
	// MaxPixels is the largest width×height accepted; larger images are refused from their
	// header, before any pixel is decoded. Default DefaultMaxPixels.
	MaxPixels int64 `json:"max_pixels,omitempty"`
	// MaxBytes is the largest encoded image accepted. Default DefaultMaxBytes.
	MaxBytes int64 `json:"max_bytes,omitempty"`
}

// WithDefaults fills the zero fields.
func (l Limits) WithDefaults() Limits {
	if l.MaxPixels <= 0 {
		l.MaxPixels = DefaultMaxPixels
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Size is the target size of the resize.
type Size struct {
	Height int `json:"height"`
	Width  int `json:"width"`
}

// Config is SiglipImageProcessor's configuration (the fields of preprocessor_config.json that
// change the pixels) plus the limits on untrusted input. Build it with Default or
// FromHFProcessorConfig: the zero value resizes nothing and is refused by Validate.
type Config struct {
	DoResize      bool      `json:"do_resize"`
	Size          Size      `json:"size"`
	Resample      int       `json:"resample"`
	DoRescale     bool      `json:"do_rescale"`
	RescaleFactor float64   `json:"rescale_factor"`
	DoNormalize   bool      `json:"do_normalize"`
	ImageMean     []float64 `json:"image_mean"`
	ImageStd      []float64 `json:"image_std"`
	// Limits do not change the pixels of an accepted image, so CacheKey leaves them out.
	Limits Limits `json:"limits,omitempty"`
}

// Default is SiglipImageProcessor's default configuration at the given square size (224 for
// google/siglip-base-patch16-224): bicubic resize, rescale by 1/255, normalise with mean and std
// 0.5 per channel (so pixel values lie in [-1, 1]).
func Default(imageSize int) Config {
	return Config{
		DoResize: true, Size: Size{Height: imageSize, Width: imageSize}, Resample: Bicubic,
		DoRescale: true, RescaleFactor: 1.0 / 255, DoNormalize: true,
		ImageMean: []float64{0.5, 0.5, 0.5}, ImageStd: []float64{0.5, 0.5, 0.5},
	}
}

// Validate checks every field and names the first bad one with its allowed values.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("imageproc: config: %s=%v: %s", field, v, want)
	}
	if c.DoResize {
		if c.Size.Height <= 0 || c.Size.Width <= 0 || c.Size.Height > maxSide || c.Size.Width > maxSide {
			return bad("size", fmt.Sprintf("{height:%d width:%d}", c.Size.Height, c.Size.Width),
				fmt.Sprintf("want height and width in [1, %d]", maxSide))
		}
		if _, ok := filterNames[c.Resample]; !ok {
			if c.Resample == Nearest {
				return bad("resample", c.Resample, "0 (nearest) is not implemented; allowed values: "+allowedFilters)
			}
			return bad("resample", c.Resample, "allowed values: "+allowedFilters)
		}
	}
	if c.DoRescale && (math.IsNaN(c.RescaleFactor) || math.IsInf(c.RescaleFactor, 0) || c.RescaleFactor <= 0) {
		return bad("rescale_factor", c.RescaleFactor, "want a finite value > 0")
	}
	if c.DoNormalize {
		for _, f := range []struct {
			name string
			v    []float64
		}{{"image_mean", c.ImageMean}, {"image_std", c.ImageStd}} {
			if len(f.v) != 3 {
				return bad(f.name, f.v, "want 3 values (one per RGB channel)")
			}
			for _, x := range f.v {
				if math.IsNaN(x) || math.IsInf(x, 0) || (f.name == "image_std" && float32(x) == 0) {
					return bad(f.name, f.v, "want finite values (std non-zero)")
				}
			}
		}
	}
	if c.Limits.MaxPixels < 0 || c.Limits.MaxBytes < 0 {
		return bad("limits", fmt.Sprintf("{max_pixels:%d max_bytes:%d}", c.Limits.MaxPixels, c.Limits.MaxBytes), "want values >= 0 (0: default)")
	}
	return nil
}

// hfProcessorFields are the keys of preprocessor_config.json that FromHFProcessorConfig reads or
// accepts as bookkeeping; any other key is refused by name.
var hfProcessorFields = []string{
	"do_resize", "size", "resample", "do_rescale", "rescale_factor", "do_normalize", "image_mean",
	"image_std", "do_convert_rgb", "image_processor_type", "processor_class",
}

// FromHFProcessorConfig reads a preprocessor_config.json written for SiglipImageProcessor (or its
// fast variant, whose configuration is the same; Temper computes what the slow, PIL-based one
// does). Fields left out take SiglipImageProcessor's defaults. A field that would change the
// pixels in a way Temper does not implement (center crop, padding, shortest_edge sizes, another
// processor's options) is refused by name.
func FromHFProcessorConfig(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("imageproc: preprocessor_config.json: %w", err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(hfProcessorFields, k) {
			return Config{}, fmt.Errorf("imageproc: preprocessor_config.json: field %q is not implemented (allowed fields: %s)",
				k, strings.Join(hfProcessorFields, ", "))
		}
	}
	c := Default(224)
	get := func(key string, dst any) error {
		v, ok := raw[key]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("imageproc: preprocessor_config.json: %s: %w", key, err)
		}
		return nil
	}
	if t, ok := raw["image_processor_type"]; ok {
		var s string
		_ = json.Unmarshal(t, &s)
		if s != "SiglipImageProcessor" && s != "SiglipImageProcessorFast" {
			return Config{}, fmt.Errorf("imageproc: preprocessor_config.json: image_processor_type=%s: allowed values: SiglipImageProcessor, SiglipImageProcessorFast", t)
		}
	}
	if v, ok := raw["size"]; ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return Config{}, fmt.Errorf("imageproc: preprocessor_config.json: size: %w", err)
		}
		for k := range m {
			if k != "height" && k != "width" {
				return Config{}, fmt.Errorf("imageproc: preprocessor_config.json: size.%s is not implemented (SigLIP resizes to {height, width})", k)
			}
		}
	}
	var mean, std json.RawMessage
	for _, f := range []struct {
		key string
		dst any
	}{
		{"do_resize", &c.DoResize}, {"size", &c.Size}, {"resample", &c.Resample}, {"do_rescale", &c.DoRescale},
		{"rescale_factor", &c.RescaleFactor}, {"do_normalize", &c.DoNormalize}, {"image_mean", &mean},
		{"image_std", &std}, {"do_convert_rgb", new(*bool)},
	} {
		if err := get(f.key, f.dst); err != nil {
			return Config{}, err
		}
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
		dst *[]float64
	}{{"image_mean", mean, &c.ImageMean}, {"image_std", std, &c.ImageStd}} {
		if f.raw == nil {
			continue
		}
		v, err := floatOrList(f.raw)
		if err != nil {
			return Config{}, fmt.Errorf("imageproc: preprocessor_config.json: %s: %w", f.key, err)
		}
		*f.dst = v
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// floatOrList reads a number (one value for every channel, as transformers accepts) or a list.
func floatOrList(raw json.RawMessage) ([]float64, error) {
	var x float64
	if err := json.Unmarshal(raw, &x); err == nil {
		return []float64{x, x, x}, nil
	}
	var xs []float64
	if err := json.Unmarshal(raw, &xs); err != nil {
		return nil, fmt.Errorf("want a number or a list of 3 numbers: %w", err)
	}
	return xs, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
