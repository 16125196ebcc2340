package imageproc

import "image"

// JPEG colour: Go's decoder returns the Y, Cb and Cr planes at their stored resolution and
// image.YCbCr.At repeats each chroma sample over the pixels it covers; libjpeg (which Pillow
// uses) interpolates chroma with its "fancy" triangle filter and converts with its own
// fixed-point tables. ycbcrToRGB does what libjpeg-turbo's jdsample.c (h2v1, h1v2 and h2v2
// fancy upsampling, plain replication otherwise) and jdcolor.c (ycc_rgb_convert) do, so that the
// remaining difference from Pillow is the inverse DCT's rounding alone.

// libjpeg's fixed-point constants: FIX(x) = x·2^16 rounded, SCALEBITS = 16.
const (
	fixCrR   = 91881  // FIX(1.40200)
	fixCbB   = 116130 // FIX(1.77200)
	fixCrG   = 46802  // FIX(0.71414)
	fixCbG   = 22554  // FIX(0.34414)
	oneHalf  = 1 << 15
	scaleBit = 16
)

func ycbcrToRGB(m *image.YCbCr) *RGB {
	b := m.Rect
	w, h := b.Dx(), b.Dy()
	hs, vs := 1, 1 // chroma subsampling factors
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio422:
		hs = 2
	case image.YCbCrSubsampleRatio420:
		hs, vs = 2, 2
	case image.YCbCrSubsampleRatio440:
		vs = 2
	case image.YCbCrSubsampleRatio411:
		hs = 4
	case image.YCbCrSubsampleRatio410:
		hs, vs = 4, 2
	}
	cw, ch := (w+hs-1)/hs, (h+vs-1)/vs // libjpeg's downsampled_width/height
	cb := upsample(m.Cb, m.CStride, cw, ch, hs, vs, w, h)
	cr := upsample(m.Cr, m.CStride, cw, ch, hs, vs, w, h)
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for y := range h {
		for x := range w {
			yy := int32(m.Y[y*m.YStride+x])
			cbv, crv := int32(cb[y*w+x])-128, int32(cr[y*w+x])-128
			r := yy + ((fixCrR*crv + oneHalf) >> scaleBit)
			g := yy + ((-fixCbG*cbv + oneHalf - fixCrG*crv) >> scaleBit)
			bl := yy + ((fixCbB*cbv + oneHalf) >> scaleBit)
			i := 3 * (y*w + x)
			out.Pix[i], out.Pix[i+1], out.Pix[i+2] = clamp255(r), clamp255(g), clamp255(bl)
		}
	}
	return out
}

// clamp255 clamps v to [0, 255].
func clamp255(v int32) uint8 {
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return uint8(v)
}

// upsample expands a cw×ch chroma plane (stride s) to w×h. Rows above the first and below the
// last are the edge rows repeated, as libjpeg's context rows are.
func upsample(p []uint8, s, cw, ch, hs, vs, w, h int) []uint8 {
	at := func(x, y int) int32 { return int32(p[y*s+x]) }
	out := make([]uint8, w*h)
	set := func(x, y int, v int32) {
		if x < w && y < h {
			out[y*w+x] = uint8(v)
		}
	}
	switch {
	case hs == 2 && vs == 1 && cw > 2: // h2v1_fancy_upsample
		for y := range ch {
			set(0, y, at(0, y))
			set(1, y, (at(0, y)*3+at(1, y)+2)>>2)
			for x := 1; x < cw-1; x++ {
				v := at(x, y) * 3
				set(2*x, y, (v+at(x-1, y)+1)>>2)
				set(2*x+1, y, (v+at(x+1, y)+2)>>2)
			}
			v := at(cw-1, y)
			set(2*cw-2, y, (v*3+at(cw-2, y)+1)>>2)
			set(2*cw-1, y, v)
		}
	case hs == 1 && vs == 2: // h1v2_fancy_upsample
		for y := range ch {
			up, down := max(y-1, 0), min(y+1, ch-1)
			for x := range cw {
				set(x, 2*y, (at(x, y)*3+at(x, up)+1)>>2)
				set(x, 2*y+1, (at(x, y)*3+at(x, down)+2)>>2)
			}
		}
	case hs == 2 && vs == 2 && cw > 2: // h2v2_fancy_upsample
		for y := range ch {
			for v := range 2 {
				near := y - 1 // next nearest row: above for the upper output row, below for the lower
				if v == 1 {
					near = y + 1
				}
				near = min(max(near, 0), ch-1)
				oy := 2*y + v
				col := func(x int) int32 { return at(x, y)*3 + at(x, near) }
				this, next := col(0), col(1)
				set(0, oy, (this*4+8)>>4)
				set(1, oy, (this*3+next+7)>>4)
				last := this
				this = next
				for x := 1; x < cw-1; x++ {
					next = col(x + 1)
					set(2*x, oy, (this*3+last+8)>>4)
					set(2*x+1, oy, (this*3+next+7)>>4)
					last, this = this, next
				}
				set(2*cw-2, oy, (this*3+last+8)>>4)
				set(2*cw-1, oy, (this*4+7)>>4)
			}
		}
	default: // int_upsample: each sample repeated hs×vs times
		for y := range h {
			for x := range w {
				out[y*w+x] = p[(y/vs)*s+x/hs]
			}
		}
	}
	return out
}
