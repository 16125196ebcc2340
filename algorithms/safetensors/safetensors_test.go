package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
)

// goldenHeader is written out by hand from the spec: tensors in name order,
// offsets relative to the data buffer, metadata first; 194 bytes padded with
// 6 spaces to 200 (0xc8) so the data starts 8-byte aligned.
const goldenHeader = `{"__metadata__":{"format":"pt"},` +
	`"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
	`"b":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]},` +
	`"c":{"dtype":"I64","shape":[],"data_offsets":[10,18]}}` + "      "

func goldenFile() []byte {
	var b []byte
	b = append(b, 0xc8, 0, 0, 0, 0, 0, 0, 0) // header length 200, little-endian u64
	b = append(b, goldenHeader...)
	b = append(b, 0x00, 0x00, 0x80, 0x3f) // a[0] = 1.0f
	b = append(b, 0x00, 0x00, 0x00, 0xc0) // a[1] = -2.0f
	b = append(b, 0x80, 0x3f)             // b[0] = bf16 1.0
	b = append(b, 7, 0, 0, 0, 0, 0, 0, 0) // c = int64 7
	return b
}

func goldenTensors() []Tensor {
	return []Tensor{
		{Name: "c", DType: I64, Shape: []int{}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "a", DType: F32, Shape: []int{2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}},
		{Name: "b", DType: BF16, Shape: []int{1}, Data: []byte{0x80, 0x3f}},
	}
}

func TestGoldenWrite(t *testing.T) {
	if len(goldenHeader) != 200 {
		t.Fatalf("fixture header is %d bytes, want 200", len(goldenHeader))
	}
	var buf bytes.Buffer
	if err := Write(&buf, goldenTensors(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.Bytes(), goldenFile(); !bytes.Equal(got, want) {
		t.Fatalf("Write mismatch\n got %q\nwant %q", got, want)
	}
}

func TestGoldenRead(t *testing.T) {
	f, err := Read(bytes.NewReader(goldenFile()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, map[string]string{"format": "pt"}) {
		t.Errorf("metadata = %v", f.Metadata)
	}
	names := []string{}
	for _, tn := range f.Tensors {
		names = append(names, tn.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) {
		t.Fatalf("names = %v", names)
	}
	a, _ := f.Tensor("a")
	av, err := a.ToFloat32()
	if err != nil || !reflect.DeepEqual(av, []float32{1, -2}) {
		t.Errorf("a = %v, %v", av, err)
	}
	b, _ := f.Tensor("b")
	bv, err := b.ToFloat32()
	if err != nil || !reflect.DeepEqual(bv, []float32{1}) {
		t.Errorf("b = %v, %v", bv, err)
	}
	c, _ := f.Tensor("c")
	if c.DType != I64 || len(c.Shape) != 0 || binary.LittleEndian.Uint64(c.Data) != 7 {
		t.Errorf("c = %+v", c)
	}
	if _, err := c.ToFloat32(); err == nil {
		t.Error("ToFloat32 on I64 should fail")
	}
}

// A header written by another implementation: unsorted keys, no metadata,
// minimal padding, extra unknown field.
func TestReadForeignOrder(t *testing.T) {
	hdr := `{"y":{"dtype":"F16","shape":[1],"data_offsets":[4,6]},"x":{"dtype":"I32","shape":[1,1],"data_offsets":[0,4],"extra":1}}`
	for len(hdr)%8 != 0 {
		hdr += " "
	}
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, uint64(len(hdr)))
	b = append(b, hdr...)
	b = append(b, 1, 0, 0, 0, 0x00, 0x3c)
	f, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata != nil || len(f.Tensors) != 2 || f.Tensors[0].Name != "x" || f.Tensors[1].Name != "y" {
		t.Fatalf("got %+v", f)
	}
	y, _ := f.Tensors[1].ToFloat32()
	if y[0] != 1 {
		t.Errorf("y = %v", y)
	}
}

func TestRoundTripAllDTypes(t *testing.T) {
	var tensors []Tensor
	for i, d := range []DType{F64, F32, F16, BF16, I64, I32, I16, I8, U8, Bool, F8E4M3, F8E5M2, U16, U32, U64} {
		shape := []int{2, 3}
		data := make([]byte, 6*d.Size())
		for j := range data {
			data[j] = byte(i*31 + j*7)
		}
		tensors = append(tensors, Tensor{Name: "t." + string(d), DType: d, Shape: shape, Data: data})
	}
	tensors = append(tensors,
		Tensor{Name: "empty", DType: F32, Shape: []int{0, 4}, Data: []byte{}},
		Tensor{Name: "scalar", DType: F32, Shape: nil, Data: []byte{1, 2, 3, 4}},
		Tensor{Name: "odd \"name\"/é", DType: BF16, Shape: []int{1}, Data: []byte{5, 6}})
	md := map[string]string{"format": "pt", "note": "quotes \" and \n newlines"}
	var buf bytes.Buffer
	if err := Write(&buf, tensors, md); err != nil {
		t.Fatal(err)
	}
	hlen := binary.LittleEndian.Uint64(buf.Bytes())
	if (8+hlen)%8 != 0 {
		t.Errorf("data start %d not 8-byte aligned", 8+hlen)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(f.Metadata, md) {
		t.Errorf("metadata %v", f.Metadata)
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tensors))
	}
	for _, want := range tensors {
		got, ok := f.Tensor(want.Name)
		if !ok {
			t.Fatalf("missing %q", want.Name)
		}
		if got.DType != want.DType || !bytes.Equal(got.Data, want.Data) || len(got.Shape) != len(want.Shape) {
			t.Errorf("%q: got %+v want %+v", want.Name, got, want)
		}
		for i := range want.Shape {
			if got.Shape[i] != want.Shape[i] {
				t.Errorf("%q: shape %v want %v", want.Name, got.Shape, want.Shape)
			}
		}
	}

	// The same bytes through ReadHeader + ReadTensor (random access).
	h, err := ReadHeader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if h.DataStart+h.DataSize != int64(buf.Len()) {
		t.Errorf("DataStart %d + DataSize %d != file size %d", h.DataStart, h.DataSize, buf.Len())
	}
	got, err := h.ReadTensor(bytes.NewReader(buf.Bytes()), "t.BF16")
	if err != nil || !bytes.Equal(got.Data, tensors[3].Data) {
		t.Errorf("ReadTensor t.BF16 = %v, %v", got, err)
	}
	if _, err := h.ReadTensor(bytes.NewReader(buf.Bytes()), "nope"); err == nil {
		t.Error("ReadTensor of a missing name should fail")
	}
	if _, err := h.ReadTensor(bytes.NewReader(buf.Bytes()[:buf.Len()-1]), "t.U8"); err == nil ||
		!strings.Contains(err.Error(), `"t.U8"`) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadTensor on a truncated file: %v", err)
	}
}

func TestFloatRoundTrip(t *testing.T) {
	vals := []float32{0, 1, -2, 0.5, 3.25, -1024, 1.0 / 1024}
	for _, d := range []DType{F32, F64, F16, BF16} {
		tn, err := FromFloat32("w", []int{7}, vals, d)
		if err != nil {
			t.Fatal(err)
		}
		if len(tn.Data) != 7*d.Size() {
			t.Errorf("%s: %d bytes", d, len(tn.Data))
		}
		got, err := tn.ToFloat32()
		if err != nil || !reflect.DeepEqual(got, vals) {
			t.Errorf("%s: %v, %v", d, got, err)
		}
	}
	if _, err := FromFloat32("w", []int{2}, vals, F32); err == nil {
		t.Error("shape/data mismatch should fail")
	}
	if _, err := FromFloat32("w", []int{7}, vals, I32); err == nil {
		t.Error("non-float dtype should fail")
	}
	if _, err := (Tensor{Name: "w", DType: F32, Shape: []int{3}, Data: make([]byte, 8)}).ToFloat32(); err == nil {
		t.Error("short data should fail")
	}
}

func TestBF16Bits(t *testing.T) {
	tests := []struct {
		in   uint32 // float32 bits
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1.0
		{0xc0000000, 0xc000}, // -2.0
		{0x80000000, 0x8000}, // -0
		{0x40490fdb, 0x4049}, // pi: low half 0x0fdb < 0x8000, round down
		{0x3dcccccd, 0x3dcd}, // 0.1: low half 0xcccd > 0x8000, round up
		{0x3f808000, 0x3f80}, // tie, keep even 0x3f80
		{0x3f818000, 0x3f82}, // tie, round up to even 0x3f82
		{0x3f808001, 0x3f81}, // just above the tie
		{0x3f807fff, 0x3f80}, // just below the tie
		{0x7f7fffff, 0x7f80}, // max float32 overflows to +Inf
		{0x7f800000, 0x7f80}, // +Inf
		{0xff800000, 0xff80}, // -Inf
		{0x7fc00000, 0x7fc0}, // quiet NaN
		{0x7f800001, 0x7fc0}, // signalling NaN with low payload: must stay NaN
		{0x00000001, 0x0000}, // tiny subnormal rounds to +0
	}
	for _, tc := range tests {
		if got := BF16FromFloat32(math.Float32frombits(tc.in)); got != tc.want {
			t.Errorf("BF16FromFloat32(%#08x) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	// Every non-NaN bf16 survives widen+narrow exactly.
	for h := 0; h < 1<<16; h++ {
		f := BF16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := BF16FromFloat32(f); got != uint16(h) {
			t.Fatalf("bf16 %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func TestF16Bits(t *testing.T) {
	tests := []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{0.1, 0x2e66},
		{1.0 / 3, 0x3555},
		{65504, 0x7bff},                              // max finite
		{65519, 0x7bff},                              // below the tie: stays finite
		{65520, 0x7c00},                              // tie between 0x7bff (odd) and 2^16: rounds to Inf
		{1e5, 0x7c00},                                // overflow
		{float32(math.Inf(-1)), 0xfc00},              // -Inf
		{float32(math.NaN()), 0x7e00},                // NaN
		{0x1p-14, 0x0400},                            // smallest normal
		{1023 * 0x1p-24, 0x03ff},                     // largest subnormal
		{0x1p-24, 0x0001},                            // smallest subnormal
		{0x1p-25, 0x0000},                            // tie between 0 and 2^-24: even is 0
		{1.5 * 0x1p-25, 0x0001},                      // above the tie
		{0x1p-26, 0x0000},                            // far below
		{1 + 0x1p-11, 0x3c00},                        // tie: keep even mantissa
		{1 + 3*0x1p-11, 0x3c02},                      // tie: round up to even
		{(2047.0 / 2048) * 0x1p-14, 0x0400},          // subnormal rounding carries into the smallest normal
		{float32(-(1023*0x1p-24 + 0x1p-26)), 0x83ff}, // negative subnormal rounds down in magnitude
	}
	for _, tc := range tests {
		if got := F16FromFloat32(tc.in); got != tc.want {
			t.Errorf("F16FromFloat32(%g) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	widen := []struct {
		in   uint16
		want float32
	}{
		{0x0001, 0x1p-24}, {0x03ff, 1023 * 0x1p-24}, {0x3555, 0.333251953125},
		{0x7bff, 65504}, {0xfc00, float32(math.Inf(-1))}, {0xc000, -2},
	}
	for _, tc := range widen {
		if got := F16ToFloat32(tc.in); got != tc.want {
			t.Errorf("F16ToFloat32(%#04x) = %g, want %g", tc.in, got, tc.want)
		}
	}
	if got := F16ToFloat32(0x8000); math.Float32bits(got) != 0x80000000 {
		t.Errorf("F16ToFloat32(-0) = %#08x", math.Float32bits(got))
	}
	if got := F16ToFloat32(0x7e00); got == got {
		t.Errorf("F16ToFloat32(NaN) = %g", got)
	}
	for h := 0; h < 1<<16; h++ {
		f := F16ToFloat32(uint16(h))
		if f != f {
			continue
		}
		if got := F16FromFloat32(f); got != uint16(h) {
			t.Fatalf("f16 %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func withHeader(hdr string, data ...byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint64(b, uint64(len(hdr)))
	b = append(b, hdr...)
	return append(b, data...)
}

// readers gives the same bytes as a seekable reader and as a plain stream,
// which take different paths through Read.
func readers(b []byte) map[string]io.Reader {
	return map[string]io.Reader{
		"seeker": bytes.NewReader(b),
		"stream": struct{ io.Reader }{bytes.NewReader(b)},
	}
}

// A header may claim terabytes; Read and ReadTensor must fail on the short
// file without trying to allocate what it claims.
func TestLyingHeaderDoesNotAllocate(t *testing.T) {
	file := withHeader(`{"big":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}}`, 1, 2, 3, 4)
	for kind, r := range readers(file) {
		if _, err := Read(r); err == nil || !strings.Contains(err.Error(), `"big"`) {
			t.Errorf("%s: Read error %v", kind, err)
		}
	}
	h, err := ReadHeader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ReadTensor(bytes.NewReader(file), "big"); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadTensor error %v", err)
	}
}

// Tensors above the first read chunk take the growing path.
func TestReadLargeStream(t *testing.T) {
	defer func(c int64) { readChunk = c }(readChunk)
	readChunk = 1 << 10
	n := int(readChunk + readChunk/2 + 3)
	big := Tensor{Name: "big", DType: U8, Shape: []int{n}, Data: make([]byte, n)}
	for i := range big.Data {
		big.Data[i] = byte(i * 7)
	}
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{big}, nil); err != nil {
		t.Fatal(err)
	}
	for kind, r := range readers(buf.Bytes()) {
		f, err := Read(r)
		if err != nil || !bytes.Equal(f.Tensors[0].Data, big.Data) {
			t.Errorf("%s: %v", kind, err)
		}
	}
	cut := buf.Bytes()[:buf.Len()-1]
	if _, err := Read(struct{ io.Reader }{bytes.NewReader(cut)}); err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated stream: %v", err)
	}
}

func TestReadMalformed(t *testing.T) {
	ok := `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`
	tests := []struct {
		name string
		file []byte
		want string // substring of the error
	}{
		{"empty", nil, "header length"},
		{"short length", []byte{1, 2, 3}, "header length"},
		{"huge length", binary.LittleEndian.AppendUint64(nil, 1<<40), "exceeds"},
		{"tiny length", withHeader("{"), "too small"},
		{"header cut", binary.LittleEndian.AppendUint64(nil, 64), "truncated"},
		{"not an object", withHeader("[1, 2]  "), "start with"},
		{"bad json", withHeader(`{"a":{"dtype":"F32",}}`), "invalid JSON"},
		{"trailing garbage", withHeader(ok+"x", 0, 0, 0, 0), "trailing"},
		{"duplicate", withHeader(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 0, 0), "duplicate"},
		{"unknown dtype", withHeader(`{"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}}`, 0, 0, 0, 0), `unsupported dtype "Q4"`},
		{"missing shape", withHeader(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, 0, 0, 0, 0), "required"},
		{"negative dim", withHeader(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 0, 0, 0, 0), "bad dimension"},
		{"three offsets", withHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}`, 0, 0, 0, 0), "want 2"},
		{"reversed offsets", withHeader(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`), "bad data_offsets"},
		{"size mismatch", withHeader(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 0, 0, 0, 0), "needs 8"},
		{"hole", withHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 0, 0, 0, 0, 0, 0, 0, 0), "hole"},
		{"overlap", withHeader(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 0, 0, 0, 0), "overlap"},
		{"metadata not strings", withHeader(`{"__metadata__":{"k":1}}`), "metadata"},
		{"shape overflow", withHeader(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 0, 0, 0, 0), "too large"},
		{"truncated data", withHeader(ok, 0, 0), `tensor "a"`},
		{"extra data", withHeader(ok, 0, 0, 0, 0, 9), "trailing bytes"},
	}
	for _, tc := range tests {
		for kind, r := range readers(tc.file) {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				_, err := Read(r)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Read error = %v, want it to contain %q", err, tc.want)
				}
				if !strings.HasPrefix(err.Error(), "safetensors: ") {
					t.Errorf("error %q lacks the package prefix", err)
				}
			})
		}
	}
}

func TestTruncatedNamesTensor(t *testing.T) {
	full := goldenFile()
	tests := []struct {
		cut  int // bytes removed from the end
		want string
	}{
		{1, `"c"`}, {8, `"c"`}, {9, `"b"`}, {11, `"a"`}, {18, `"a"`},
	}
	for _, tc := range tests {
		for kind, r := range readers(full[:len(full)-tc.cut]) {
			_, err := Read(r)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s cut %d: error %v, want tensor %s and ErrUnexpectedEOF", kind, tc.cut, err, tc.want)
			}
		}
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name    string
		tensors []Tensor
	}{
		{"short data", []Tensor{{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 4)}}},
		{"unknown dtype", []Tensor{{Name: "a", DType: "Q4", Shape: []int{1}, Data: make([]byte, 1)}}},
		{"duplicate", []Tensor{{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}}},
		{"reserved name", []Tensor{{Name: "__metadata__", DType: U8, Shape: []int{1}, Data: []byte{1}}}},
		{"empty name", []Tensor{{Name: "", DType: U8, Shape: []int{1}, Data: []byte{1}}}},
		{"negative dim", []Tensor{{Name: "a", DType: U8, Shape: []int{-1}, Data: nil}}},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		if err := Write(&buf, tc.tensors, nil); err == nil {
			t.Errorf("%s: Write succeeded", tc.name)
		} else if buf.Len() != 0 {
			t.Errorf("%s: Write wrote %d bytes before failing", tc.name, buf.Len())
		}
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestWriteStreamsAndReportsWriterErrors(t *testing.T) {
	for n, want := range []string{"header length", "header", `tensor "a"`, `tensor "b"`} {
		err := Write(&failWriter{n: n}, goldenTensors(), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("fail after %d writes: %v, want %q", n, err, want)
		}
	}
}

func TestEmptyFile(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := withHeader("{}      "); !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got %q want %q", buf.Bytes(), want)
	}
	f, err := Read(&buf)
	if err != nil || len(f.Tensors) != 0 {
		t.Fatalf("%v %v", f, err)
	}
}
