package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// DType is a safetensors element type, spelled as in the header.
type DType string

// The element types this package knows. Float conversions exist for F64, F32,
// F16 and BF16; the others are carried as raw bytes.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U8     DType = "U8"
	Bool   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	U16    DType = "U16"
	U32    DType = "U32"
	U64    DType = "U64"
)

// Size is the number of bytes of one element, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, Bool, F8E4M3, F8E5M2:
		return 1
	}
	return 0
}

// numElements is prod(shape) with overflow and sign checks; a scalar (empty
// shape) has one element.
func numElements(shape []int) (int, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in shape %v", d, shape)
		}
		if d != 0 && n > math.MaxInt64/8/d {
			return 0, fmt.Errorf("shape %v too large", shape)
		}
		n *= d
	}
	return n, nil
}

// byteSize is numElements(shape)*dtype size.
func byteSize(d DType, shape []int) (int, error) {
	size := d.Size()
	if size == 0 {
		return 0, fmt.Errorf("unsupported dtype %q", string(d))
	}
	n, err := numElements(shape)
	if err != nil {
		return 0, err
	}
	return n * size, nil // numElements keeps n below MaxInt64/8.
}

// BF16FromFloat32 rounds f to bfloat16 (round to nearest, ties to even). NaN
// stays NaN (quieted, sign kept); overflow rounds to ±Inf as in IEEE.
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: truncating could turn it into Inf.
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToFloat32 widens a bfloat16 exactly.
func BF16ToFloat32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F16FromFloat32 rounds f to IEEE half precision (round to nearest, ties to
// even), producing subnormals, ±0, ±Inf on overflow and a quiet NaN for NaN.
func F16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // rebias
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal half: value = m * 2^-24 with m = full >> (14-e).
		if e < -10 {
			return sign // below half the smallest subnormal: rounds to zero.
		}
		full := mant | 0x800000
		shift := uint(14 - e)
		m := full >> shift
		rem := full & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && m&1 == 1) {
			m++ // may carry into the smallest normal, which is the right encoding.
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is correct, up to and including Inf.
	}
	return sign | uint16(h)
}

// F16ToFloat32 widens an IEEE half exactly.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: mant * 2^-24, exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// ToFloat32 decodes the tensor's little-endian data as float32 values,
// widening F16/BF16 exactly and narrowing F64 by Go conversion.
func (t Tensor) ToFloat32() ([]float32, error) {
	want, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return nil, fmt.Errorf("safetensors: to float32 %q: %w", t.Name, err)
	}
	if len(t.Data) != want {
		return nil, fmt.Errorf("safetensors: to float32 %q: data has %d bytes, shape %v of %s needs %d",
			t.Name, len(t.Data), t.Shape, t.DType, want)
	}
	n := want / t.DType.Size()
	out := make([]float32, n)
	d := t.Data
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	case BF16:
		for i := range out {
			out[i] = BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case F16:
		for i := range out {
			out[i] = F16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	default:
		return nil, fmt.Errorf("safetensors: to float32 %q: dtype %s is not a float type", t.Name, t.DType)
	}
	return out, nil
}

// FromFloat32 builds a tensor of the given float dtype (F32, F64, F16 or BF16)
// from row-major float32 values; F16/BF16 round to nearest even.
func FromFloat32(name string, shape []int, data []float32, dtype DType) (Tensor, error) {
	n, err := numElements(shape)
	if err != nil {
		return Tensor{}, fmt.Errorf("safetensors: from float32 %q: %w", name, err)
	}
	if n != len(data) {
		return Tensor{}, fmt.Errorf("safetensors: from float32 %q: shape %v needs %d values, got %d", name, shape, n, len(data))
	}
	buf := make([]byte, n*dtype.Size())
	if !putFloat32(buf, data, dtype) {
		return Tensor{}, fmt.Errorf("safetensors: from float32 %q: dtype %q is not a float type", name, string(dtype))
	}
	return Tensor{Name: name, DType: dtype, Shape: append([]int(nil), shape...), Data: buf}, nil
}

// EncodeFloat32 writes data as little-endian values of a float dtype (F32, F64, F16 or BF16;
// narrowing rounds to nearest even) through a small buffer: FromFloat32's bytes without holding
// them all.
func EncodeFloat32(w io.Writer, data []float32, dtype DType) error {
	size := dtype.Size()
	switch dtype {
	case F32, F64, F16, BF16:
	default:
		return fmt.Errorf("safetensors: encode float32: dtype %q is not a float type", string(dtype))
	}
	const chunk = 1 << 14
	buf := make([]byte, min(len(data), chunk)*size)
	for start := 0; start < len(data); start += chunk {
		part := data[start:min(len(data), start+chunk)]
		b := buf[:len(part)*size]
		putFloat32(b, part, dtype)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// putFloat32 writes data into b (len(data)·dtype.Size() bytes) as little-endian values of a float
// dtype (F32, F64, F16 or BF16; narrowing rounds to nearest even); false for any other dtype.
func putFloat32(b []byte, data []float32, dtype DType) bool {
	switch dtype {
	case F32:
		for i, v := range data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
	case F64:
		for i, v := range data {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(float64(v)))
		}
	case BF16:
		for i, v := range data {
			binary.LittleEndian.PutUint16(b[2*i:], BF16FromFloat32(v))
		}
	case F16:
		for i, v := range data {
			binary.LittleEndian.PutUint16(b[2*i:], F16FromFloat32(v))
		}
	default:
		return false
	}
	return true
}
