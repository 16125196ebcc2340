package imageproc

import (
	"fmt"
	"math"
)

// Pillow's convolution resampling (libImaging/Resample.c), reproduced operation for operation so
// that the result is the same bytes: coefficients computed in float64 exactly as there, converted
// to fixed point with 22 fractional bits, a horizontal pass over the rows the vertical pass needs
// (rounded and clipped to 8 bits), then a vertical pass. Products that feed an addition are
// wrapped in float64(…) so that no compiler fuses them into an FMA, which C on x86-64 does not.

// precisionBits is PRECISION_BITS: 32 bits − 8 for the result − 2 for overflow.
const precisionBits = 32 - 8 - 2

type resampleFilter struct {
	fn      func(float64) float64
	support float64
}

var filters = map[int]resampleFilter{
	Box:      {boxFilter, 0.5},
	Bilinear: {bilinearFilter, 1},
	Hamming:  {hammingFilter, 1},
	Bicubic:  {bicubicFilter, 2},
	Lanczos:  {lanczosFilter, 3},
}

func boxFilter(x float64) float64 {
	if x > -0.5 && x <= 0.5 {
		return 1
	}
	return 0
}

func bilinearFilter(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// hamming's constants are C float literals (0.54f, 0.46f) promoted to double.
var hamA, hamB = float64(float32(0.54)), float64(float32(0.46))

func hammingFilter(x float64) float64 {
	if x < 0 {
		x = -x
	}
	if x == 0 {
		return 1
	}
	if x >= 1 {
		return 0
	}
	x = x * math.Pi
	return math.Sin(x) / x * (hamA + float64(hamB*math.Cos(x)))
}

func bicubicFilter(x float64) float64 {
	const a = -0.5
	if x < 0 {
		x = -x
	}
	if x < 1 {
		return float64(float64(float64((a+2.0)*x)-(a+3.0))*x*x) + 1
	}
	if x < 2 {
		return float64(float64(float64(float64((x-5)*x)+8)*x)-4) * a
	}
	return 0
}

func sincFilter(x float64) float64 {
	if x == 0 {
		return 1
	}
	x = x * math.Pi
	return math.Sin(x) / x
}

func lanczosFilter(x float64) float64 {
	if -3.0 <= x && x < 3.0 {
		return sincFilter(x) * sincFilter(x/3)
	}
	return 0
}

// coeffs is precompute_coeffs followed by normalize_coeffs_8bpc: for each output index its first
// input index, the number of inputs, and ksize fixed-point weights.
type coeffs struct {
	ksize  int
	bounds []int // xmin, xmax (a count) per output index
	k      []int32
}

func precompute(inSize int, in0, in1 float32, outSize int, f resampleFilter) coeffs {
	scale := float64(in1-in0) / float64(outSize)
	filterscale := scale
	if filterscale < 1 {
		filterscale = 1
	}
	support := f.support * filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{ksize: ksize, bounds: make([]int, 2*outSize), k: make([]int32, outSize*ksize)}
	kk := make([]float64, ksize)
	for xx := range outSize {
		center := float64(in0) + float64((float64(xx)+0.5)*scale)
		ww := 0.0
		ss := 1.0 / filterscale
		xmin := int(center - support + 0.5) // C's (int) truncates toward zero, as Go's conversion
		if xmin < 0 {
			xmin = 0
		}
		xmax := int(center + support + 0.5)
		if xmax > inSize {
			xmax = inSize
		}
		xmax -= xmin
		xmax = min(xmax, ksize) // never binds: xmax <= 2·support + 1 <= ksize
		for x := range kk {
			kk[x] = 0
		}
		for x := 0; x < xmax; x++ {
			w := f.fn((float64(x+xmin) - center + 0.5) * ss)
			kk[x] = w
			ww += w
		}
		for x := 0; x < xmax; x++ {
			if ww != 0 {
				kk[x] /= ww
			}
		}
		for x, v := range kk {
			p := float64(v * (1 << precisionBits))
			if v < 0 {
				c.k[xx*ksize+x] = int32(-0.5 + p)
			} else {
				c.k[xx*ksize+x] = int32(0.5 + p)
			}
		}
		c.bounds[2*xx], c.bounds[2*xx+1] = xmin, xmax
	}
	return c
}

// clip8 is Pillow's clip8: the fixed-point sum's integer part, clamped to [0, 255].
func clip8(in int32) uint8 { return clamp255(in >> precisionBits) }

// Resize resamples src to w×h with one of Pillow's convolution filters (Bicubic, Bilinear,
// Lanczos, Box, Hamming), as Pillow's Image.resize((w, h), resample) does on an RGB image.
func Resize(src *RGB, w, h, resample int) (*RGB, error) {
	f, ok := filters[resample]
	if !ok {
		return nil, fmt.Errorf("imageproc: resize: resample=%d: allowed values: %s", resample, allowedFilters)
	}
	if w <= 0 || h <= 0 || w > maxSide || h > maxSide {
		return nil, fmt.Errorf("imageproc: resize: target %dx%d: want width and height in [1, %d]", w, h, maxSide)
	}
	if src == nil || src.W <= 0 || src.H <= 0 || len(src.Pix) != src.W*src.H*3 {
		return nil, fmt.Errorf("imageproc: resize: source image is empty or its pixels do not match its size")
	}
	if src.W == w && src.H == h {
		// Image.resize returns a copy when the size is unchanged.
		return &RGB{W: w, H: h, Pix: append([]uint8(nil), src.Pix...)}, nil
	}
	vert := precompute(src.H, 0, float32(src.H), h, f)
	img := src
	if w != src.W {
		// Only the rows the vertical pass reads are resampled horizontally.
		first := vert.bounds[0]
		last := vert.bounds[2*h-2] + vert.bounds[2*h-1]
		for i := range h {
			vert.bounds[2*i] -= first
		}
		horiz := precompute(src.W, 0, float32(src.W), w, f)
		tmp := &RGB{W: w, H: last - first, Pix: make([]uint8, w*(last-first)*3)}
		for yy := 0; yy < tmp.H; yy++ {
			row := src.Pix[(yy+first)*src.W*3:]
			out := tmp.Pix[yy*w*3:]
			for xx := range w {
				xmin, xmax := horiz.bounds[2*xx], horiz.bounds[2*xx+1]
				k := horiz.k[xx*horiz.ksize:]
				ss0, ss1, ss2 := int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1))
				for x := 0; x < xmax; x++ {
					p := row[(x+xmin)*3:]
					ss0 += int32(p[0]) * k[x]
					ss1 += int32(p[1]) * k[x]
					ss2 += int32(p[2]) * k[x]
				}
				out[3*xx], out[3*xx+1], out[3*xx+2] = clip8(ss0), clip8(ss1), clip8(ss2)
			}
		}
		img = tmp
	}
	if h == src.H {
		return img, nil
	}
	out := &RGB{W: w, H: h, Pix: make([]uint8, w*h*3)}
	for yy := range h {
		ymin, ymax := vert.bounds[2*yy], vert.bounds[2*yy+1]
		k := vert.k[yy*vert.ksize:]
		dst := out.Pix[yy*w*3:]
		for xx := range w {
			ss0, ss1, ss2 := int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1))
			for y := 0; y < ymax; y++ {
				p := img.Pix[((y+ymin)*w+xx)*3:]
				ss0 += int32(p[0]) * k[y]
				ss1 += int32(p[1]) * k[y]
				ss2 += int32(p[2]) * k[y]
			}
			dst[3*xx], dst[3*xx+1], dst[3*xx+2] = clip8(ss0), clip8(ss1), clip8(ss2)
		}
	}
	return out, nil
}
