package layoutrender

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"

	"github.com/temperml/temper/algorithms/verify"
)

// Roles a box may have, and how each is drawn by default.
const (
	RoleBackground = "background" // a filled area, white by default
	RoleTitle      = "title"      // bold text, large; no fill unless a color is given
	RoleSubtitle   = "subtitle"   // bold text, medium
	RoleText       = "text"       // body text, wrapped
	RoleCaption    = "caption"    // small text
	RoleImage      = "image"      // a grey placeholder with a cross
	RoleButton     = "button"     // a filled box with centred bold text
	RoleLogo       = "logo"       // a filled box with centred bold text
	RoleShape      = "shape"      // a filled area (the default role)
)

type style struct {
	fill      color.NRGBA // default fill; A = 0: none
	textColor color.NRGBA
	bold      bool
	center    bool    // text centred in the box (else top-left with padding)
	maxSize   float64 // largest font size, as a fraction of the output height
}

var (
	ink    = color.NRGBA{0x11, 0x18, 0x27, 0xff}
	styles = map[string]style{
		RoleBackground: {fill: color.NRGBA{0xff, 0xff, 0xff, 0xff}, textColor: ink, maxSize: 0.08},
		RoleTitle:      {textColor: ink, bold: true, maxSize: 0.12},
		RoleSubtitle:   {textColor: ink, bold: true, maxSize: 0.08},
		RoleText:       {textColor: ink, maxSize: 0.05},
		RoleCaption:    {textColor: color.NRGBA{0x4b, 0x55, 0x63, 0xff}, maxSize: 0.04},
		RoleImage:      {fill: color.NRGBA{0x9c, 0xa3, 0xaf, 0xff}, textColor: ink, center: true, maxSize: 0.05},
		RoleButton:     {fill: color.NRGBA{0x25, 0x63, 0xeb, 0xff}, textColor: color.NRGBA{0xff, 0xff, 0xff, 0xff}, bold: true, center: true, maxSize: 0.06},
		RoleLogo:       {fill: color.NRGBA{0xf5, 0x9e, 0x0b, 0xff}, textColor: ink, bold: true, center: true, maxSize: 0.08},
		RoleShape:      {fill: color.NRGBA{0xd1, 0xd5, 0xdb, 0xff}, textColor: ink, center: true, maxSize: 0.05},
	}
	roleNames = func() []string {
		out := make([]string, 0, len(styles))
		for r := range styles {
			out = append(out, r)
		}
		sort.Strings(out)
		return out
	}()
)

// Named colours accepted besides #rgb, #rgba, #rrggbb and #rrggbbaa (CSS values).
var namedColors = map[string]color.NRGBA{
	"black": {0, 0, 0, 255}, "white": {255, 255, 255, 255}, "gray": {128, 128, 128, 255}, "grey": {128, 128, 128, 255},
	"lightgray": {211, 211, 211, 255}, "darkgray": {169, 169, 169, 255}, "red": {255, 0, 0, 255}, "green": {0, 128, 0, 255},
	"blue": {0, 0, 255, 255}, "navy": {0, 0, 128, 255}, "teal": {0, 128, 128, 255}, "yellow": {255, 255, 0, 255},
	"orange": {255, 165, 0, 255}, "purple": {128, 0, 128, 255}, "pink": {255, 192, 203, 255}, "brown": {165, 42, 42, 255},
	"transparent": {0, 0, 0, 0},
}

// Limits on what one render may cost.
const (
	DefaultSize  = 224 // SigLIP's input size
	MaxSize      = 1024
	MaxTextRunes = 300
	MaxAllText   = 4000 // characters of text over all boxes
	minFontPx    = 6
)

// Options fix the picture.
type Options struct {
	// Canvas is the layout's coordinate space (the layout verifier's canvas): x grows right, y
	// down, and the canvas maps onto the whole image.
	Canvas verify.Size
	// Width and Height are the image size in pixels; 0 means DefaultSize.
	Width, Height int
	// Tag: read the JSON from inside <tag>…</tag>, as the layout verifier's tag.
	Tag string
}

func (o Options) withDefaults() (Options, error) {
	o.Width = cmp.Or(o.Width, DefaultSize)
	o.Height = cmp.Or(o.Height, DefaultSize)
	if o.Width < 1 || o.Height < 1 || o.Width > MaxSize || o.Height > MaxSize {
		return o, fmt.Errorf("layoutrender: options width=%d height=%d: want 1..%d", o.Width, o.Height, MaxSize)
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !finite(o.Canvas.W) || !finite(o.Canvas.H) || o.Canvas.W <= 0 || o.Canvas.H <= 0 {
		return o, fmt.Errorf("layoutrender: options canvas={w:%g h:%g}: want finite w > 0 and h > 0", o.Canvas.W, o.Canvas.H)
	}
	return o, nil
}

// LayoutError is a completion that cannot be drawn. Feedback is what a policy is told: for a
// malformed layout, the layout verifier's feedback verbatim.
type LayoutError struct{ Feedback string }

func (e *LayoutError) Error() string { return "layoutrender: " + e.Feedback }

// Result is a rendered layout.
type Result struct {
	Image *image.RGBA
	// Skipped lists the ids of boxes not drawn because their geometry is invalid (the layout
	// verifier fails them too), in layout order.
	Skipped []string
}

// box is one parsed box.
type box struct {
	id         string
	role       string
	fill, text color.NRGBA
	label      string
	x, y, w, h float64
}

// Render draws the layout in completion.
func Render(completion string, opts Options) (Result, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	boxes, skipped, err := readLayout(completion, opts.Tag)
	if err != nil {
		return Result{}, err
	}
	img := image.NewRGBA(image.Rect(0, 0, opts.Width, opts.Height))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	r := &renderer{img: img, sx: float64(opts.Width) / opts.Canvas.W, sy: float64(opts.Height) / opts.Canvas.H}
	for _, b := range boxes {
		r.draw(b)
	}
	return Result{Image: img, Skipped: skipped}, nil
}

// Check is nil when Render would draw the completion (read from inside <tag>…</tag> when tag is
// set), else the *LayoutError Render would return; it reads the layout without drawing it.
func Check(completion, tag string) error {
	_, _, err := readLayout(completion, tag)
	return err
}

// readLayout parses the completion and checks every box: the boxes to draw, the ids of those
// whose geometry is invalid, or a *LayoutError.
func readLayout(completion, tag string) (boxes []box, skipped []string, err error) {
	vboxes, raw, err := verify.ParseLayout(completion, tag)
	if err != nil {
		return nil, nil, &LayoutError{Feedback: err.Error()}
	}
	total := 0
	for i, vb := range vboxes {
		b, ok, err := readBox(i, vb, raw[i])
		if err != nil {
			return nil, nil, err
		}
		if total += utf8.RuneCountInString(b.label); total > MaxAllText {
			return nil, nil, &LayoutError{Feedback: fmt.Sprintf("too much text: over %d characters in all boxes", MaxAllText)}
		}
		if !ok {
			skipped = append(skipped, vb.ID)
			continue
		}
		boxes = append(boxes, b)
	}
	return boxes, skipped, nil
}

// RenderPNG is Render encoded as PNG (best compression, so the bytes depend on nothing but the
// pixels and the Go version's encoder).
func RenderPNG(completion string, opts Options) ([]byte, Result, error) {
	res, err := Render(completion, opts)
	if err != nil {
		return nil, res, err
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, res.Image); err != nil {
		return nil, res, fmt.Errorf("layoutrender: encode png: %w", err)
	}
	return buf.Bytes(), res, nil
}

// readBox checks the attributes of box i; ok is false when its geometry is invalid.
func readBox(i int, vb verify.Box, raw json.RawMessage) (box, bool, error) {
	name := fmt.Sprintf("box %d (id %s)", i, strconv.Quote(clip(vb.ID, 40)))
	bad := func(field, format string, args ...any) error {
		return &LayoutError{Feedback: fmt.Sprintf("%s: %s: %s", name, field, fmt.Sprintf(format, args...))}
	}
	var attrs struct {
		Role      *json.RawMessage `json:"role"`
		Color     *json.RawMessage `json:"color"`
		TextColor *json.RawMessage `json:"text_color"`
		Text      *json.RawMessage `json:"text"`
	}
	if err := json.Unmarshal(raw, &attrs); err != nil {
		return box{}, false, &LayoutError{Feedback: fmt.Sprintf("%s: want a JSON object", name)}
	}
	str := func(field string, v *json.RawMessage) (string, bool, error) {
		if v == nil || string(*v) == "null" {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(*v, &s); err != nil {
			return "", false, bad(field, "want a string")
		}
		return s, true, nil
	}
	b := box{id: vb.ID, role: RoleShape}
	role, ok, err := str("role", attrs.Role)
	if err != nil {
		return box{}, false, err
	}
	if ok {
		if _, known := styles[role]; !known {
			return box{}, false, bad("role", "%s: allowed values: %s", strconv.Quote(clip(role, 40)), strings.Join(roleNames, ", "))
		}
		b.role = role
	}
	st := styles[b.role]
	b.fill, b.text = st.fill, st.textColor
	for _, c := range []struct {
		field string
		v     *json.RawMessage
		dst   *color.NRGBA
	}{{"color", attrs.Color, &b.fill}, {"text_color", attrs.TextColor, &b.text}} {
		s, ok, err := str(c.field, c.v)
		if err != nil {
			return box{}, false, err
		}
		if !ok {
			continue
		}
		col, err := parseColor(s)
		if err != nil {
			return box{}, false, bad(c.field, "%v", err)
		}
		*c.dst = col
	}
	if attrs.TextColor == nil && attrs.Color != nil && st.fill.A != 0 && b.fill.A != 0 {
		b.text = contrasting(b.fill) // a filled box with a chosen fill: keep its text readable
	}
	label, ok, err := str("text", attrs.Text)
	if err != nil {
		return box{}, false, err
	}
	if ok {
		if !utf8.ValidString(label) {
			return box{}, false, bad("text", "not valid UTF-8")
		}
		if n := utf8.RuneCountInString(label); n > MaxTextRunes {
			return box{}, false, bad("text", "%d characters: at most %d", n, MaxTextRunes)
		}
		b.label = label
	}
	if vb.X == nil || vb.Y == nil || vb.W == nil || vb.H == nil {
		return b, false, nil
	}
	b.x, b.y, b.w, b.h = *vb.X, *vb.Y, *vb.W, *vb.H
	for _, v := range []float64{b.x, b.y, b.w, b.h, b.x + b.w, b.y + b.h} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return b, false, nil
		}
	}
	return b, b.w > 0 && b.h > 0, nil
}

// parseColor reads #rgb, #rgba, #rrggbb, #rrggbbaa or a name of namedColors.
func parseColor(s string) (color.NRGBA, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if c, ok := namedColors[t]; ok {
		return c, nil
	}
	names := make([]string, 0, len(namedColors))
	for n := range namedColors {
		names = append(names, n)
	}
	sort.Strings(names)
	errBad := fmt.Errorf("%s: want #rgb, #rgba, #rrggbb, #rrggbbaa or a name (%s)", strconv.Quote(clip(s, 40)), strings.Join(names, ", "))
	hex, ok := strings.CutPrefix(t, "#")
	if !ok {
		return color.NRGBA{}, errBad
	}
	var digits []uint8
	for _, c := range []byte(hex) {
		v, ok := hexDigit(c)
		if !ok {
			return color.NRGBA{}, errBad
		}
		digits = append(digits, v)
	}
	switch len(digits) {
	case 3, 4:
		out := [4]uint8{0, 0, 0, 255}
		for i, d := range digits {
			out[i] = d * 17
		}
		return color.NRGBA{out[0], out[1], out[2], out[3]}, nil
	case 6, 8:
		out := [4]uint8{0, 0, 0, 255}
		for i := 0; i < len(digits); i += 2 {
			out[i/2] = digits[i]<<4 | digits[i+1]
		}
		return color.NRGBA{out[0], out[1], out[2], out[3]}, nil
	}
	return color.NRGBA{}, errBad
}

func hexDigit(c byte) (uint8, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// contrasting is black or white, whichever reads better on c (integer luma, Rec. 601 weights).
func contrasting(c color.NRGBA) color.NRGBA {
	if 299*int(c.R)+587*int(c.G)+114*int(c.B) >= 128*1000 {
		return ink
	}
	return color.NRGBA{0xff, 0xff, 0xff, 0xff}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

type renderer struct {
	img    *image.RGBA
	sx, sy float64
	faces  map[faceKey]font.Face
}

type faceKey struct {
	size int
	bold bool
}

// pixel maps a canvas coordinate to a pixel edge, clamped to [0, n].
func pixel(v, scale float64, n int) int {
	p := math.Round(v * scale)
	switch {
	case math.IsNaN(p) || p < 0:
		return 0
	case p > float64(n):
		return n
	}
	return int(p)
}

func (r *renderer) draw(b box) {
	bounds := r.img.Bounds()
	rect := image.Rect(pixel(b.x, r.sx, bounds.Dx()), pixel(b.y, r.sy, bounds.Dy()),
		pixel(b.x+b.w, r.sx, bounds.Dx()), pixel(b.y+b.h, r.sy, bounds.Dy()))
	if rect.Empty() {
		return
	}
	if b.fill.A != 0 {
		draw.Draw(r.img, rect, image.NewUniform(b.fill), image.Point{}, draw.Over)
	}
	if b.role == RoleImage {
		r.cross(rect, color.NRGBA{0x6b, 0x72, 0x80, 0xff})
	}
	if b.label != "" && b.text.A != 0 {
		r.text(b, rect)
	}
}

// cross draws the two diagonals of rect (an image placeholder), one pixel wide.
func (r *renderer) cross(rect image.Rectangle, c color.NRGBA) {
	w, h := rect.Dx(), rect.Dy()
	steps := max(w, h)
	for i := range steps {
		x := rect.Min.X + i*w/steps
		y := rect.Min.Y + i*h/steps
		r.img.Set(x, y, c)
		r.img.Set(rect.Max.X-1-(x-rect.Min.X), y, c)
	}
}

var (
	fontsOnce     sync.Once
	regular, bold *opentype.Font
	fontsErr      error
)

// fontDPI is 72 so that a face's size in points is its size in pixels.
const fontDPI = 72

func fonts() (*opentype.Font, *opentype.Font, error) {
	fontsOnce.Do(func() {
		if regular, fontsErr = opentype.Parse(goregular.TTF); fontsErr != nil {
			return
		}
		bold, fontsErr = opentype.Parse(gobold.TTF)
	})
	return regular, bold, fontsErr
}

func (r *renderer) face(size int, isBold bool) font.Face {
	k := faceKey{size, isBold}
	if f, ok := r.faces[k]; ok {
		return f
	}
	reg, bo, err := fonts()
	if err != nil {
		return nil
	}
	f := reg
	if isBold {
		f = bo
	}
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: float64(size), DPI: fontDPI, Hinting: font.HintingFull})
	if err != nil {
		return nil
	}
	if r.faces == nil {
		r.faces = map[faceKey]font.Face{}
	}
	r.faces[k] = face
	return face
}

// text draws b's label inside rect: the largest size up to the role's that fits the words
// wrapped to the box width (down to minFontPx, then clipped), top-left or centred.
func (r *renderer) text(b box, rect image.Rectangle) {
	st := styles[b.role]
	pad := max(1, min(rect.Dx(), rect.Dy())/12)
	inner := rect.Inset(pad)
	if inner.Empty() {
		return
	}
	maxPx := int(st.maxSize * float64(r.img.Bounds().Dy()))
	maxPx = min(max(maxPx, minFontPx), max(inner.Dy(), minFontPx))
	// The largest size whose wrapped lines fit, by bisection (taller text wraps into more lines,
	// so fitting is monotone in the size up to rounding; either way the choice is deterministic).
	fits := func(size int) (font.Face, []string, bool) {
		face := r.face(size, st.bold)
		if face == nil {
			return nil, nil, false
		}
		lines := wrap(face, b.label, inner.Dx())
		return face, lines, lineHeight(face)*len(lines) <= inner.Dy()
	}
	lo, hi := minFontPx, maxPx
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if _, _, ok := fits(mid); ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	face, lines, _ := fits(lo)
	if face == nil {
		return
	}
	lh := lineHeight(face)
	dst := r.img.SubImage(inner).(*image.RGBA) // glyphs outside the box are clipped
	d := font.Drawer{Dst: dst, Src: image.NewUniform(b.text), Face: face}
	top := inner.Min.Y
	if st.center {
		top += (inner.Dy() - lh*len(lines)) / 2
	}
	ascent := face.Metrics().Ascent.Ceil()
	for i, line := range lines {
		x := inner.Min.X
		if st.center {
			x += (inner.Dx() - d.MeasureString(line).Ceil()) / 2
		}
		d.Dot = fixed.P(x, top+i*lh+ascent)
		if d.Dot.Y.Ceil()-ascent > inner.Max.Y {
			break
		}
		d.DrawString(line)
	}
}

func lineHeight(f font.Face) int { return f.Metrics().Height.Ceil() }

// wrap breaks s into lines no wider than width (a word longer than the width gets a line of its
// own and is clipped); explicit newlines are kept.
func wrap(f font.Face, s string, width int) []string {
	var lines []string
	limit := fixed.I(width)
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			cand := w
			if line != "" {
				cand = line + " " + w
			}
			if line != "" && font.MeasureString(f, cand) > limit {
				lines = append(lines, line)
				line = w
				continue
			}
			line = cand
		}
		lines = append(lines, line)
	}
	return lines
}
