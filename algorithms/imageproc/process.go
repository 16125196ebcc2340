package imageproc

// Pixels are the pixel values of one image, channels first: Values[(c·H+y)·W+x], C = 3.
type Pixels struct {
	C, H, W int
	Values  []float32
}

// Normalize rescales and normalises an RGB image as SiglipImageProcessor does after resizing:
// float32(float64(v)·rescale_factor), then float32((x − mean) / std) per channel, channels first.
// It ignores the resize fields of cfg.
func Normalize(img *RGB, cfg Config) Pixels {
	var mean, std [3]float32
	for c := range 3 {
		if cfg.DoNormalize {
			mean[c], std[c] = float32(cfg.ImageMean[c]), float32(cfg.ImageStd[c])
		}
	}
	plane := img.W * img.H
	out := Pixels{C: 3, H: img.H, W: img.W, Values: make([]float32, 3*plane)}
	for i := range plane {
		for c := range 3 {
			v := float32(img.Pix[3*i+c])
			if cfg.DoRescale {
				v = float32(float64(img.Pix[3*i+c]) * cfg.RescaleFactor)
			}
			if cfg.DoNormalize {
				v = float32(float32(v-mean[c]) / std[c])
			}
			out.Values[c*plane+i] = v
		}
	}
	return out
}

// Process resizes (when cfg.DoResize) and normalises a decoded image.
func Process(img *RGB, cfg Config) (Pixels, error) {
	if err := cfg.Validate(); err != nil {
		return Pixels{}, err
	}
	if cfg.DoResize {
		var err error
		if img, err = Resize(img, cfg.Size.Width, cfg.Size.Height, cfg.Resample); err != nil {
			return Pixels{}, err
		}
	}
	return Normalize(img, cfg), nil
}

// Preprocess is the whole processor on encoded bytes: Decode (limits checked from the header
// first), Resize, Normalize.
func Preprocess(data []byte, cfg Config) (Pixels, error) {
	if err := cfg.Validate(); err != nil {
		return Pixels{}, err
	}
	img, err := Decode(data, cfg.Limits)
	if err != nil {
		return Pixels{}, err
	}
	return Process(img, cfg)
}
