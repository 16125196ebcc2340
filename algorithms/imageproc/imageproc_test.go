package imageproc

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
)

// pngHeader is a PNG signature and IHDR chunk claiming w×h 8-bit RGB, with no pixel data.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	chunk := append([]byte("IHDR"), ihdr...)
	_ = binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(chunk)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// jpegHeader is SOI, a JFIF APP0 and a baseline SOF0 claiming w×h with three components.
func jpegHeader(w, h uint16) []byte {
	b := []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00,
		0xff, 0xc0, 0x00, 0x11, 0x08, byte(h >> 8), byte(h), byte(w >> 8), byte(w), 0x03,
		0x01, 0x22, 0x00, 0x02, 0x11, 0x01, 0x03, 0x11, 0x01}
	return b
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDecodeRefusesBadInput: every bad image is an error that says what is wrong, and the
// oversized ones are refused from the header (the 20,000×20,000 PNG is 33 bytes: decoding it would
// need 1.6 GB).
func TestDecodeRefusesBadInput(t *testing.T) {
	good := readFile(t, "testdata/images/rgb-37x29.png")
	goodJPEG := readFile(t, "testdata/images/photo-96x80.jpg")
	cases := []struct {
		name string
		data []byte
		lim  Limits
		want string
	}{
		{"empty", nil, Limits{}, "empty image"},
		{"unknown", []byte("hello, world"), Limits{}, `unknown image format (first bytes "hello, w"): allowed formats: png, jpeg`},
		{"gif", []byte("GIF89a\x01\x00\x01\x00"), Limits{}, "unsupported image format gif: allowed formats: png, jpeg"},
		{"webp", []byte("RIFF\x10\x00\x00\x00WEBPVP8 "), Limits{}, "unsupported image format webp"},
		{"bmp", []byte("BM\x00\x00"), Limits{}, "unsupported image format bmp"},
		{"huge png", pngHeader(20000, 20000), Limits{}, "png image of 20000x20000 = 400000000 pixels is over the limit of 40000000 pixels (limits.max_pixels); refused before decoding"},
		{"huge jpeg", jpegHeader(20000, 20000), Limits{}, "jpeg image of 20000x20000 = 400000000 pixels is over the limit"},
		{"configured pixel limit", good, Limits{MaxPixels: 1000}, "png image of 37x29 = 1073 pixels is over the limit of 1000 pixels"},
		{"byte limit", good, Limits{MaxBytes: 100}, "is over the limit of 100 bytes (limits.max_bytes)"},
		{"zero size", pngHeader(0, 5), Limits{}, "read png header"},
		{"truncated header", pngHeader(10, 10)[:20], Limits{}, "read png header: truncated header: unexpected EOF"},
		{"truncated png", good[:len(good)/2], Limits{}, "decode png (37x29): truncated or corrupt image data: png: invalid format: not enough pixel data"},
		{"header only png", pngHeader(10, 10), Limits{}, "decode png (10x10): truncated or corrupt image data"},
		{"truncated jpeg", goodJPEG[:len(goodJPEG)/2], Limits{}, "decode jpeg (96x80): truncated or corrupt image data"},
		{"corrupt png", append(append([]byte(nil), good[:60]...), bytes.Repeat([]byte{0x55}, 200)...), Limits{}, "decode png (37x29)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.data, c.lim)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "imageproc: ") {
				t.Fatalf("Decode: %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := Decode(good, Limits{MaxPixels: 37 * 29, MaxBytes: int64(len(good))}); err != nil {
		t.Fatalf("an image exactly at the limits: %v", err)
	}
}

// TestToRGBModes: the colour conversions Pillow's convert("RGB") does, on images built here.
func TestToRGBModes(t *testing.T) {
	nrgba := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	nrgba.SetNRGBA(0, 0, color.NRGBA{200, 100, 50, 10}) // translucent: straight values kept
	gray16 := image.NewGray16(image.Rect(0, 0, 1, 1))
	gray16.SetGray16(0, 0, color.Gray16{0xabcd})
	rgba64 := image.NewNRGBA64(image.Rect(0, 0, 1, 1))
	rgba64.SetNRGBA64(0, 0, color.NRGBA64{0x1234, 0x5678, 0x9abc, 0x8000})
	pal := image.NewPaletted(image.Rect(0, 0, 1, 1), color.Palette{color.NRGBA{1, 2, 3, 0}, color.NRGBA{9, 8, 7, 0}})
	pal.SetColorIndex(0, 0, 1)
	cases := []struct {
		name string
		img  image.Image
		want [3]uint8
	}{
		{"nrgba drops alpha", nrgba, [3]uint8{200, 100, 50}},
		{"gray16 keeps the high byte", gray16, [3]uint8{0xab, 0xab, 0xab}},
		{"nrgba64 keeps the high bytes", rgba64, [3]uint8{0x12, 0x56, 0x9a}},
		{"palette ignores transparency", pal, [3]uint8{9, 8, 7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode(encodePNG(t, c.img), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if [3]uint8(got.Pix) != c.want {
				t.Fatalf("RGB %v, want %v", got.Pix, c.want)
			}
		})
	}
}

func TestParseRef(t *testing.T) {
	png := readFile(t, "testdata/images/palette-40x40.png")
	jpg := readFile(t, "testdata/images/gray-20x30.jpg")
	b64 := base64.StdEncoding.EncodeToString
	cases := []struct {
		in   string
		want Ref
		err  string
	}{
		{in: "file:///data/img/a.png", want: Ref{Scheme: "file", Path: "/data/img/a.png"}},
		{in: "file://localhost/data/a%20b.png", want: Ref{Scheme: "file", Path: "/data/a b.png"}},
		{in: "file:///data/x/../a.png", want: Ref{Scheme: "file", Path: "/data/a.png"}},
		{in: "gs://my-bucket/imgs/a.jpg", want: Ref{Scheme: "gs", Bucket: "my-bucket", Path: "imgs/a.jpg"}},
		{in: "data:image/png;base64," + b64(png), want: Ref{Scheme: "data", MediaType: "image/png", Data: png}},
		{in: "data:image/jpeg;base64," + b64(jpg), want: Ref{Scheme: "data", MediaType: "image/jpeg", Data: jpg}},
		{in: "images/a.png", err: `image reference "images/a.png": not a URI; want file:///absolute/path, gs://bucket/object`},
		{in: "https://example.com/a.png", err: `scheme "https" is not supported`},
		{in: "file:relative.png", err: "want file:///absolute/path"},
		{in: "file://host/a.png", err: `file URI with host "host"`},
		{in: "file:///a%2.png", err: "malformed percent-escape"},
		{in: "file:///a%00.png", err: "escaped NUL"},
		{in: "file:///dir/", err: "names a directory"},
		{in: "gs://bucket", err: "want gs://bucket/object"},
		{in: "gs://B!/a.png", err: `bucket "B!"`},
		{in: "data:image/gif;base64,R0lGOD", err: `media type "image/gif": allowed values: image/png, image/jpeg`},
		{in: "data:image/png,rawbytes", err: "only base64 is accepted"},
		{in: "data:image/png;base64", err: "no ',' before the data"},
		{in: "data:image/png;base64,@@@@", err: "malformed base64"},
		{in: "data:image/png;base64," + b64(jpg), err: "declared image/png but the data is jpeg"},
		{in: "data:image/png;base64," + b64([]byte("not an image at all")), err: "declared image/png but the data is unknown"},
		{in: "data:image/png;base64," + strings.Repeat("A", 200), err: "decode to more than the limit of 100 bytes"},
	}
	for _, c := range cases {
		t.Run(clipName(c.in), func(t *testing.T) {
			lim := Limits{MaxBytes: 100_000}
			if strings.Contains(c.err, "limit of 100 bytes") {
				lim.MaxBytes = 100
			}
			got, err := ParseRef(c.in, lim)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseRef: %v, want an error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Scheme != c.want.Scheme || got.Path != c.want.Path || got.Bucket != c.want.Bucket ||
				got.MediaType != c.want.MediaType || !bytes.Equal(got.Data, c.want.Data) {
				t.Fatalf("ParseRef = %+v, want %+v", got, c.want)
			}
		})
	}
}

func clipName(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

func TestParseContent(t *testing.T) {
	pngURI := "data:image/png;base64," + base64.StdEncoding.EncodeToString(readFile(t, "testdata/images/palette-40x40.png"))
	cases := []struct {
		name  string
		raw   string
		types []string
		err   string
	}{
		{"string", `"hello"`, []string{"text"}, ""},
		{"parts", `[{"type":"text","text":"rate this"},{"type":"image","image":"gs://bkt/a.png"},{"type":"image","image":"` + pngURI + `"}]`, []string{"text", "image", "image"}, ""},
		{"missing", `null`, nil, "imageproc: chosen: missing: want a string or a list of content parts"},
		{"number", `3`, nil, "imageproc: chosen: want a string or a list of content parts"},
		{"empty list", `[]`, nil, "imageproc: chosen: empty list of content parts"},
		{"not an object", `["a"]`, nil, `imageproc: chosen[0]: want an object`},
		{"no type", `[{"text":"a"}]`, nil, "imageproc: chosen[0].type: missing"},
		{"bad type", `[{"type":"video","video":"x"}]`, nil, `imageproc: chosen[0].type: "video": allowed values: text, image`},
		{"openai form", `[{"type":"image_url","image_url":{"url":"x"}}]`, nil, `imageproc: chosen[0].type: "image_url" is not supported: write {"type": "image", "image": "<uri>"}`},
		{"extra key", `[{"type":"image","image":"gs://bkt/a.png","url":"x"}]`, nil, "imageproc: chosen[0].url: unknown field for a image part"},
		{"text on image", `[{"type":"image","image":"gs://bkt/a.png","text":"x"}]`, nil, "imageproc: chosen[0].text: unknown field"},
		{"image not a string", `[{"type":"image","image":5}]`, nil, "imageproc: chosen[0].image: want a string"},
		{"bad uri", `[{"type":"text","text":"a"},{"type":"image","image":"data:image/png;base64,!!"}]`, nil, "imageproc: chosen[1].image: data URI: malformed base64"},
		{"relative path", `[{"type":"image","image":"a.png"}]`, nil, `imageproc: chosen[0].image: image reference "a.png": not a URI`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts, err := ParseContent(json.RawMessage(c.raw), "chosen", Limits{})
			if c.err != "" {
				var fe *FieldError
				if err == nil || !strings.HasPrefix(err.Error(), c.err) || !errors.As(err, &fe) {
					t.Fatalf("ParseContent: %v, want a *FieldError starting %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for i, p := range parts {
				types = append(types, p.Type)
				if p.Type == PartImage && (p.Ref == nil || p.Field != "chosen["+string(rune('0'+i))+"]") {
					t.Errorf("part %d: ref %v field %q", i, p.Ref, p.Field)
				}
			}
			if strings.Join(types, ",") != strings.Join(c.types, ",") {
				t.Fatalf("types %v, want %v", types, c.types)
			}
		})
	}
}

func TestFromHFProcessorConfig(t *testing.T) {
	cfg, err := FromHFProcessorConfig(readFile(t, "testdata/preprocessor_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d := Default(224); CacheKeyOf("x", cfg) != CacheKeyOf("x", d) {
		t.Fatalf("google/siglip-base-patch16-224's config %+v differs from Default(224) %+v", cfg, d)
	}
	cases := []struct {
		json string
		err  string
	}{
		{`{"do_center_crop": true}`, `field "do_center_crop" is not implemented (allowed fields: do_resize, size`},
		{`{"size": {"shortest_edge": 224}}`, "size.shortest_edge is not implemented"},
		{`{"resample": 0}`, "resample=0: 0 (nearest) is not implemented; allowed values: 1 (lanczos), 2 (bilinear), 3 (bicubic), 4 (box), 5 (hamming)"},
		{`{"resample": 7}`, "resample=7: allowed values"},
		{`{"image_std": [0.5, 0, 0.5]}`, "image_std=[0.5 0 0.5]: want finite values (std non-zero)"},
		{`{"image_mean": [0.5, 0.5]}`, "image_mean=[0.5 0.5]: want 3 values"},
		{`{"rescale_factor": -1}`, "rescale_factor=-1: want a finite value > 0"},
		{`{"size": {"height": 0, "width": 5}}`, "size={height:0 width:5}"},
		{`{"image_processor_type": "CLIPImageProcessor"}`, `image_processor_type="CLIPImageProcessor": allowed values: SiglipImageProcessor, SiglipImageProcessorFast`},
		{`[1]`, "preprocessor_config.json"},
	}
	for _, c := range cases {
		_, err := FromHFProcessorConfig([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want an error containing %q", c.json, err, c.err)
		}
	}
	// A single number for mean/std is broadcast, as transformers does; do_convert_rgb is accepted.
	cfg, err = FromHFProcessorConfig([]byte(`{"image_mean": 0.25, "image_std": 2, "do_convert_rgb": true, "size": {"height": 8, "width": 16}}`))
	if err != nil || cfg.ImageMean[2] != 0.25 || cfg.ImageStd[1] != 2 || cfg.Size.Width != 16 {
		t.Fatalf("%+v, %v", cfg, err)
	}
}

func TestCacheKey(t *testing.T) {
	a := readFile(t, "testdata/images/rgb-37x29.png")
	b := readFile(t, "testdata/images/gray-50x70.png")
	base := Default(224)
	key := CacheKey(a, base)
	differs := map[string]Config{}
	for name, mut := range map[string]func(*Config){
		"size":      func(c *Config) { c.Size.Width = 225 },
		"resample":  func(c *Config) { c.Resample = Bilinear },
		"factor":    func(c *Config) { c.RescaleFactor = 1.0 / 256 },
		"mean":      func(c *Config) { c.ImageMean = []float64{0.5, 0.5, 0.4} },
		"std":       func(c *Config) { c.ImageStd = []float64{0.5, 0.6, 0.5} },
		"no resize": func(c *Config) { c.DoResize = false },
		"no norm":   func(c *Config) { c.DoNormalize = false },
	} {
		c := base
		c.ImageMean, c.ImageStd = append([]float64(nil), base.ImageMean...), append([]float64(nil), base.ImageStd...)
		mut(&c)
		differs[name] = c
	}
	for name, c := range differs {
		if CacheKey(a, c) == key {
			t.Errorf("changing %s kept the key", name)
		}
	}
	if CacheKey(b, base) == key {
		t.Error("another image kept the key")
	}
	same := base
	same.Limits = Limits{MaxPixels: 5}
	if CacheKey(a, same) != key {
		t.Error("the limits changed the key")
	}
	off, off2 := differs["no norm"], differs["no norm"]
	off2.ImageMean = []float64{9, 9, 9}
	if CacheKey(a, off) != CacheKey(a, off2) {
		t.Error("mean changed the key while normalisation is off")
	}
	if len(key) != 64 || key != CacheKey(append([]byte(nil), a...), Default(224)) {
		t.Errorf("key %q is not a stable hex sha256", key)
	}
}

func TestMarshalPixels(t *testing.T) {
	p, err := Preprocess(readFile(t, "testdata/images/rgba-64x48.png"), Default(8))
	if err != nil {
		t.Fatal(err)
	}
	blob := MarshalPixels(p)
	q, err := UnmarshalPixels(blob)
	if err != nil || q.C != 3 || q.H != 8 || q.W != 8 || pixelsSHA(q) != pixelsSHA(p) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range [][]byte{nil, []byte("TPX1"), blob[:len(blob)-1], append([]byte("XXXX"), blob[4:]...)} {
		if _, err := UnmarshalPixels(bad); err == nil {
			t.Errorf("UnmarshalPixels accepted %d bytes", len(bad))
		}
	}
}
