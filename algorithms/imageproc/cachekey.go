package imageproc

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// cacheVersion changes whenever the arithmetic of Preprocess changes, so that keys of old
// outputs stop matching.
const cacheVersion = "temper/imageproc/v1"

// ContentHash is the hex SHA-256 of an encoded image.
func ContentHash(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// CacheKey names Preprocess(data, cfg)'s output: the hex SHA-256 of a version tag, the image's
// content hash and the fields of cfg that change pixels (those that are switched off do not count,
// nor do the limits). Equal keys mean equal pixel values.
func CacheKey(data []byte, cfg Config) string {
	return CacheKeyOf(ContentHash(data), cfg)
}

// CacheKeyOf is CacheKey from an already computed ContentHash.
func CacheKeyOf(contentHash string, cfg Config) string {
	c := cfg
	c.Limits = Limits{}
	if !c.DoResize {
		c.Size, c.Resample = Size{}, 0
	}
	if !c.DoRescale {
		c.RescaleFactor = 0
	}
	if !c.DoNormalize {
		c.ImageMean, c.ImageStd = nil, nil
	}
	canon, _ := json.Marshal(c) // struct fields in declaration order: canonical
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s", cacheVersion, contentHash, canon)
	return hex.EncodeToString(h.Sum(nil))
}

// pixelsMagic starts a MarshalPixels blob.
const pixelsMagic = "TPX1"

// MarshalPixels encodes pixel values for the store: "TPX1", C, H, W as uint32 little endian, then
// the float32 values little endian.
func MarshalPixels(p Pixels) []byte {
	out := make([]byte, 16+4*len(p.Values))
	copy(out, pixelsMagic)
	binary.LittleEndian.PutUint32(out[4:], uint32(p.C))
	binary.LittleEndian.PutUint32(out[8:], uint32(p.H))
	binary.LittleEndian.PutUint32(out[12:], uint32(p.W))
	for i, v := range p.Values {
		binary.LittleEndian.PutUint32(out[16+4*i:], math.Float32bits(v))
	}
	return out
}

// UnmarshalPixels decodes MarshalPixels' output, checking its header against its length.
func UnmarshalPixels(b []byte) (Pixels, error) {
	if len(b) < 16 || string(b[:4]) != pixelsMagic {
		return Pixels{}, errors.New("imageproc: unmarshal pixels: not a pixel blob (bad magic)")
	}
	c, h, w := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
	n := uint64(c) * uint64(h) * uint64(w)
	if c == 0 || h == 0 || w == 0 || n > uint64(maxSide)*maxSide*4 || uint64(len(b)-16) != 4*n {
		return Pixels{}, fmt.Errorf("imageproc: unmarshal pixels: header %dx%dx%d does not match %d data bytes", c, h, w, len(b)-16)
	}
	p := Pixels{C: int(c), H: int(h), W: int(w), Values: make([]float32, n)}
	for i := range p.Values {
		p.Values[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[16+4*i:]))
	}
	return p, nil
}
