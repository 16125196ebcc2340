package imageproc

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
)

// RGB is an 8-bit RGB image, rows top to bottom, pixels interleaved (R, G, B): Pix[(y·W+x)·3+c].
type RGB struct {
	W, H int
	Pix  []uint8
}

// Formats Decode accepts.
const (
	FormatPNG  = "png"
	FormatJPEG = "jpeg"
)

// Sniff names the format of an encoded image from its magic bytes: "png", "jpeg", the name of a
// known format Temper does not decode ("gif", "webp", "bmp", "tiff"), or "" when unknown.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return FormatPNG
	case bytes.HasPrefix(data, []byte("\xff\xd8\xff")):
		return FormatJPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return "gif"
	case len(data) >= 12 && bytes.Equal(data[:4], []byte("RIFF")) && bytes.Equal(data[8:12], []byte("WEBP")):
		return "webp"
	case bytes.HasPrefix(data, []byte("BM")):
		return "bmp"
	case bytes.HasPrefix(data, []byte("II*\x00")), bytes.HasPrefix(data, []byte("MM\x00*")):
		return "tiff"
	}
	return ""
}

// Header reads an image's format and dimensions without decoding its pixels, and checks them
// against the limits: this is what refuses a 20,000×20,000 image before it costs anything.
func Header(data []byte, lim Limits) (format string, w, h int, err error) {
	lim = lim.WithDefaults()
	if int64(len(data)) > lim.MaxBytes {
		return "", 0, 0, fmt.Errorf("imageproc: image of %d bytes is over the limit of %d bytes (limits.max_bytes)", len(data), lim.MaxBytes)
	}
	if len(data) == 0 {
		return "", 0, 0, errors.New("imageproc: empty image (0 bytes)")
	}
	format = Sniff(data)
	var cfg image.Config
	switch format {
	case FormatPNG:
		cfg, err = png.DecodeConfig(bytes.NewReader(data))
	case FormatJPEG:
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data))
	case "":
		return "", 0, 0, fmt.Errorf("imageproc: unknown image format (first bytes %q): allowed formats: png, jpeg", clipBytes(data, 8))
	default:
		return format, 0, 0, fmt.Errorf("imageproc: unsupported image format %s: allowed formats: png, jpeg", format)
	}
	if err != nil {
		return format, 0, 0, fmt.Errorf("imageproc: read %s header: %w", format, describe(err))
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return format, 0, 0, fmt.Errorf("imageproc: %s header: %dx%d image: want width and height > 0", format, cfg.Width, cfg.Height)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > lim.MaxPixels {
		return format, cfg.Width, cfg.Height, fmt.Errorf("imageproc: %s image of %dx%d = %d pixels is over the limit of %d pixels (limits.max_pixels); refused before decoding",
			format, cfg.Width, cfg.Height, px, lim.MaxPixels)
	}
	return format, cfg.Width, cfg.Height, nil
}

// Decode decodes a PNG or JPEG image into 8-bit RGB, checking the header against the limits first.
// The conversion is Pillow's convert("RGB"): alpha is dropped (not composited), grayscale is
// replicated, palette entries are looked up (their transparency ignored), 16-bit samples keep
// their high byte. JPEG colour conversion is Go's (see the package comment).
func Decode(data []byte, lim Limits) (*RGB, error) {
	format, w, h, err := Header(data, lim)
	if err != nil {
		return nil, err
	}
	var img image.Image
	switch format {
	case FormatPNG:
		img, err = png.Decode(bytes.NewReader(data))
	default:
		img, err = jpeg.Decode(bytes.NewReader(data))
	}
	if err != nil {
		// The header was sound, so whatever the decoder tripped on is in the pixel data.
		return nil, fmt.Errorf("imageproc: decode %s (%dx%d): truncated or corrupt image data: %w", format, w, h, err)
	}
	b := img.Bounds()
	if b.Dx() != w || b.Dy() != h {
		return nil, fmt.Errorf("imageproc: decode %s: header says %dx%d, pixels are %dx%d", format, w, h, b.Dx(), b.Dy())
	}
	return toRGB(img), nil
}

// describe makes the decoders' terse header errors say what they mean for a data file.
func describe(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("truncated header: %w", err)
	}
	return err
}

func clipBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// FromImage converts a decoded or drawn image (a rendered layout, say) to RGB as Decode does.
func FromImage(img image.Image) *RGB { return toRGB(img) }

// toRGB converts any decoded image to RGB the way Pillow's convert("RGB") does for the same file.
func toRGB(img image.Image) *RGB {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &RGB{W: w, H: h, Pix: make([]uint8, w*h*3)}
	put := func(x, y int, r, g, bl uint8) {
		i := (y*w + x) * 3
		out.Pix[i], out.Pix[i+1], out.Pix[i+2] = r, g, bl
	}
	switch m := img.(type) {
	case *image.NRGBA:
		for y := range h {
			row := m.Pix[y*m.Stride:]
			for x := range w {
				put(x, y, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.RGBA:
		// The PNG decoder returns RGBA only for opaque truecolour, where premultiplied and straight
		// values agree; a translucent pixel (never from a decoder) is unpremultiplied below.
		for y := range h {
			row := m.Pix[y*m.Stride:]
			for x := range w {
				if a := row[4*x+3]; a != 0xff {
					c := color.NRGBAModel.Convert(color.RGBA{row[4*x], row[4*x+1], row[4*x+2], a}).(color.NRGBA)
					put(x, y, c.R, c.G, c.B)
					continue
				}
				put(x, y, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride:]
			for x := range w {
				put(x, y, row[x], row[x], row[x])
			}
		}
	case *image.Paletted:
		lut := make([][3]uint8, len(m.Palette))
		for i, c := range m.Palette {
			lut[i] = straightRGB(c)
		}
		for y := range h {
			row := m.Pix[y*m.Stride:]
			for x := range w {
				var c [3]uint8
				if int(row[x]) < len(lut) {
					c = lut[row[x]]
				}
				put(x, y, c[0], c[1], c[2])
			}
		}
	case *image.NRGBA64:
		for y := range h {
			row := m.Pix[y*m.Stride:]
			for x := range w {
				put(x, y, row[8*x], row[8*x+2], row[8*x+4]) // high bytes (big endian)
			}
		}
	case *image.Gray16:
		for y := range h {
			row := m.Pix[y*m.Stride:]
			for x := range w {
				put(x, y, row[2*x], row[2*x], row[2*x])
			}
		}
	case *image.YCbCr:
		return ycbcrToRGB(m)
	default:
		// CMYK (JPEG), RGBA64 (16-bit opaque PNG): through the colour model.
		for y := range h {
			for x := range w {
				c := straightRGB(img.At(b.Min.X+x, b.Min.Y+y))
				put(x, y, c[0], c[1], c[2])
			}
		}
	}
	return out
}

// straightRGB is a colour's non-premultiplied 8-bit RGB.
func straightRGB(c color.Color) [3]uint8 {
	switch v := c.(type) {
	case color.NRGBA:
		return [3]uint8{v.R, v.G, v.B}
	case color.RGBA:
		if v.A == 0xff {
			return [3]uint8{v.R, v.G, v.B}
		}
	case color.Gray:
		return [3]uint8{v.Y, v.Y, v.Y}
	case color.YCbCr:
		r, g, b := color.YCbCrToRGB(v.Y, v.Cb, v.Cr)
		return [3]uint8{r, g, b}
	case color.RGBA64:
		if v.A == 0xffff {
			return [3]uint8{uint8(v.R >> 8), uint8(v.G >> 8), uint8(v.B >> 8)}
		}
	}
	n := color.NRGBA64Model.Convert(c).(color.NRGBA64)
	return [3]uint8{uint8(n.R >> 8), uint8(n.G >> 8), uint8(n.B >> 8)}
}
