package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation does,
// so a corrupt length cannot make a reader allocate gigabytes.
const MaxHeaderSize = 100_000_000

const metadataKey = "__metadata__"

// Tensor is one named tensor with its raw little-endian, row-major bytes.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Entry describes one tensor in a header. Begin and End are byte offsets
// into the data buffer, which starts at Header.DataStart in the file.
type Entry struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// Header is a parsed, validated safetensors header.
type Header struct {
	Metadata  map[string]string // nil when the file has none
	Entries   []Entry           // in data-offset order
	DataStart int64             // file offset of the data buffer: 8 + header length
	DataSize  int64             // length of the data buffer the header describes
}

// File is a fully read safetensors file.
type File struct {
	Metadata map[string]string // nil when the file has none
	Tensors  []Tensor          // in data-offset order
}

// Tensor returns the tensor with the given name.
func (f *File) Tensor(name string) (Tensor, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

// Entry returns the header entry with the given name.
func (h *Header) Entry(name string) (Entry, bool) {
	for _, e := range h.Entries {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Write streams tensors (sorted by name) and optional metadata to w in
// safetensors layout. All tensors are validated before the first byte is
// written, so a validation error leaves w untouched.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	specs := make([]Spec, len(tensors))
	byName := make(map[string]int, len(tensors))
	for i, t := range tensors {
		specs[i] = Spec{Name: t.Name, DType: t.DType, Shape: t.Shape}
		byName[t.Name] = i
		size, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
		if len(t.Data) != size {
			return fmt.Errorf("safetensors: write tensor %q: data has %d bytes, shape %v of %s needs %d",
				t.Name, len(t.Data), t.Shape, t.DType, size)
		}
	}
	return WriteStream(w, specs, metadata, func(s Spec, w io.Writer) error {
		_, err := w.Write(tensors[byName[s.Name]].Data)
		return err
	})
}

// Spec describes a tensor to write without its data.
type Spec struct {
	Name  string
	DType DType
	Shape []int
}

// Size is the number of bytes of the tensor's data (0 for an unknown dtype or a bad shape).
func (s Spec) Size() int64 {
	n, err := byteSize(s.DType, s.Shape)
	if err != nil {
		return 0
	}
	return int64(n)
}

// WriteStream writes the header for specs (sorted by name) and then asks data for each tensor's
// bytes in that order, so a file of any size is written holding one tensor at a time. For a file
// of one dtype (all that Temper writes) this is the reference implementation's order; it sorts
// mixed dtypes by dtype first, which Write does not follow. data must write exactly the tensor's
// size; the specs are validated before the first byte is written.
func WriteStream(w io.Writer, specs []Spec, metadata map[string]string, data func(s Spec, w io.Writer) error) error {
	sorted := make([]Spec, len(specs))
	copy(sorted, specs)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	entries := make([]Entry, len(sorted))
	var offset int64
	for i, t := range sorted {
		if t.Name == "" || t.Name == metadataKey {
			return fmt.Errorf("safetensors: write tensor %q: reserved or empty name", t.Name)
		}
		size, err := byteSize(t.DType, t.Shape)
		if err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
		entries[i] = Entry{Name: t.Name, DType: t.DType, Shape: t.Shape, Begin: offset, End: offset + int64(size)}
		offset += int64(size)
	}
	names := make([]string, len(sorted))
	for i, t := range sorted {
		names[i] = t.Name
	}
	sort.Strings(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			return fmt.Errorf("safetensors: write tensor %q: duplicate name", names[i])
		}
	}
	hdr, err := EncodeHeader(entries, metadata)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors: write header length: %w", err)
	}
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("safetensors: write header: %w", err)
	}
	for _, t := range sorted {
		cw := &countingWriter{w: w}
		if err := data(t, cw); err != nil {
			return fmt.Errorf("safetensors: write tensor %q: %w", t.Name, err)
		}
		if cw.n != t.Size() {
			return fmt.Errorf("safetensors: write tensor %q: %d bytes written, shape %v of %s needs %d", t.Name, cw.n, t.Shape, t.DType, t.Size())
		}
	}
	return nil
}

// EncodeHeader is the JSON header (without its length prefix) for entries in the order given and
// optional metadata, as the reference implementation writes it: metadata first, no spaces, padded
// with spaces to a multiple of 8 bytes.
func EncodeHeader(entries []Entry, metadata map[string]string) ([]byte, error) {
	var hdr bytes.Buffer
	hdr.WriteByte('{')
	first := true
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata) // sorted keys: deterministic output
		if err != nil {
			return nil, fmt.Errorf("safetensors: write metadata: %w", err)
		}
		hdr.WriteString(`"` + metadataKey + `":`)
		hdr.Write(m)
		first = false
	}
	for _, e := range entries {
		name, err := json.Marshal(e.Name)
		if err != nil {
			return nil, fmt.Errorf("safetensors: write tensor %q: %w", e.Name, err)
		}
		shape := e.Shape
		if shape == nil {
			shape = []int{} // a scalar is "shape": [], never null
		}
		sh, _ := json.Marshal(shape)
		if !first {
			hdr.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&hdr, `%s:{"dtype":%q,"shape":%s,"data_offsets":[%d,%d]}`, name, string(e.DType), sh, e.Begin, e.End)
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 { // the spec pads with spaces so data starts 8-byte aligned
		hdr.WriteByte(' ')
	}
	if hdr.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("safetensors: write: header of %d bytes exceeds %d", hdr.Len(), MaxHeaderSize)
	}
	return hdr.Bytes(), nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ReadHeader reads and validates the length prefix and JSON header from r,
// leaving r positioned at the start of the data buffer. Use
// Header.ReadTensor to fetch selected tensors from an io.ReaderAt.
func ReadHeader(r io.Reader) (*Header, error) {
	var lenBuf [8]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, fmt.Errorf("safetensors: read header length: %w", eofAsUnexpected(err))
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, fmt.Errorf("safetensors: read header: length %d exceeds %d", n, MaxHeaderSize)
	}
	if n < 2 {
		return nil, fmt.Errorf("safetensors: read header: length %d too small for a JSON object", n)
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, fmt.Errorf("safetensors: read header of %d bytes: %w", n, eofAsUnexpected(err))
	}
	h, err := parseHeader(raw)
	if err != nil {
		return nil, fmt.Errorf("safetensors: read header: %w", err)
	}
	h.DataStart = 8 + int64(n)
	return h, nil
}

type jsonEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets []int64  `json:"data_offsets"`
}

func parseHeader(raw []byte) (*Header, error) {
	if raw[0] != '{' {
		return nil, errors.New("header does not start with '{'")
	}
	body := bytes.TrimRight(raw, " ")
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	h := &Header{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		name, _ := tok.(string) // object keys are always strings
		if seen[name] {
			return nil, fmt.Errorf("duplicate key %q", name)
		}
		seen[name] = true
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("invalid JSON at %q: %w", name, err)
		}
		if name == metadataKey {
			var md map[string]string
			if err := json.Unmarshal(val, &md); err != nil {
				return nil, fmt.Errorf("metadata must map strings to strings: %w", err)
			}
			h.Metadata = md
			continue
		}
		e, err := parseEntry(name, val)
		if err != nil {
			return nil, err
		}
		h.Entries = append(h.Entries, e)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing bytes after the JSON object")
	}

	sort.SliceStable(h.Entries, func(i, j int) bool { return h.Entries[i].Begin < h.Entries[j].Begin })
	var next int64
	for _, e := range h.Entries {
		if e.Begin != next {
			if e.Begin < next {
				return nil, fmt.Errorf("tensor %q: data_offsets [%d,%d] overlap the previous tensor ending at %d", e.Name, e.Begin, e.End, next)
			}
			return nil, fmt.Errorf("tensor %q: data_offsets [%d,%d] leave a hole after offset %d", e.Name, e.Begin, e.End, next)
		}
		next = e.End
	}
	h.DataSize = next
	return h, nil
}

func parseEntry(name string, val json.RawMessage) (Entry, error) {
	var je jsonEntry
	if err := json.Unmarshal(val, &je); err != nil {
		return Entry{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	if je.DType == nil || je.Shape == nil || je.DataOffsets == nil {
		return Entry{}, fmt.Errorf("tensor %q: dtype, shape and data_offsets are all required", name)
	}
	if len(je.DataOffsets) != 2 {
		return Entry{}, fmt.Errorf("tensor %q: data_offsets has %d values, want 2", name, len(je.DataOffsets))
	}
	e := Entry{Name: name, DType: DType(*je.DType), Begin: je.DataOffsets[0], End: je.DataOffsets[1]}
	e.Shape = make([]int, len(*je.Shape))
	for i, d := range *je.Shape {
		if d < 0 || d > 1<<53 {
			return Entry{}, fmt.Errorf("tensor %q: bad dimension %d", name, d)
		}
		e.Shape[i] = int(d)
	}
	if e.Begin < 0 || e.End < e.Begin {
		return Entry{}, fmt.Errorf("tensor %q: bad data_offsets [%d,%d]", name, e.Begin, e.End)
	}
	size, err := byteSize(e.DType, e.Shape)
	if err != nil {
		return Entry{}, fmt.Errorf("tensor %q: %w", name, err)
	}
	if int64(size) != e.End-e.Begin {
		return Entry{}, fmt.Errorf("tensor %q: data_offsets [%d,%d] span %d bytes, shape %v of %s needs %d",
			name, e.Begin, e.End, e.End-e.Begin, e.Shape, e.DType, size)
	}
	return e, nil
}

// Read reads a whole safetensors file from r. The data buffer must be
// exactly as long as the header says: missing bytes name the tensor they cut
// and extra trailing bytes are an error. Memory is only committed for bytes
// that exist: when r is an io.Seeker the length is checked up front, else
// large tensors are read in growing chunks, so a lying header fails with an
// error instead of a huge allocation.
func Read(r io.Reader) (*File, error) {
	h, err := ReadHeader(r)
	if err != nil {
		return nil, err
	}
	if s, ok := r.(io.Seeker); ok {
		if err := h.checkLength(s); err != nil {
			return nil, err
		}
	}
	br := bufio.NewReader(r)
	f := &File{Metadata: h.Metadata, Tensors: make([]Tensor, 0, len(h.Entries))}
	for _, e := range h.Entries {
		data, err := readFull(br, e.End-e.Begin)
		if err != nil {
			return nil, fmt.Errorf("safetensors: read tensor %q (bytes %d..%d of data): %w", e.Name, e.Begin, e.End, eofAsUnexpected(err))
		}
		f.Tensors = append(f.Tensors, Tensor{Name: e.Name, DType: e.DType, Shape: e.Shape, Data: data})
	}
	var one [1]byte
	if n, _ := io.ReadFull(br, one[:]); n != 0 {
		return nil, fmt.Errorf("safetensors: read: trailing bytes after the %d-byte data buffer", h.DataSize)
	}
	return f, nil
}

// checkLength compares the bytes left in s with DataSize, restoring the
// position afterwards.
func (h *Header) checkLength(s io.Seeker) error {
	cur, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil // not really seekable (a pipe): fall back to streaming checks
	}
	end, err := s.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("safetensors: read: seek to end: %w", err)
	}
	if _, err := s.Seek(cur, io.SeekStart); err != nil {
		return fmt.Errorf("safetensors: read: seek back: %w", err)
	}
	left := end - cur
	for _, e := range h.Entries {
		if e.End > left {
			return fmt.Errorf("safetensors: read tensor %q (bytes %d..%d of data): truncated: data buffer has %d bytes: %w",
				e.Name, e.Begin, e.End, left, io.ErrUnexpectedEOF)
		}
	}
	if left > h.DataSize {
		return fmt.Errorf("safetensors: read: trailing bytes after the %d-byte data buffer", h.DataSize)
	}
	return nil
}

// readChunk is the size up to which readFull allocates before seeing data
// (a variable so tests can shrink it).
var readChunk int64 = 64 << 20

// readFull reads exactly n bytes, growing the buffer as data arrives once n
// exceeds readChunk.
func readFull(r io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, min(n, readChunk))
	for got := int64(0); ; {
		m, err := io.ReadFull(r, buf[got:])
		got += int64(m)
		if err != nil {
			return nil, err
		}
		if got == n {
			return buf, nil
		}
		grown := make([]byte, min(n, 2*int64(len(buf))))
		copy(grown, buf)
		buf = grown
	}
}

// ReadTensor reads the named tensor's bytes from ra, which holds the whole
// file (offsets are absolute: DataStart + Begin). The tensor's last byte is
// probed before its buffer is allocated.
func (h *Header) ReadTensor(ra io.ReaderAt, name string) (Tensor, error) {
	e, ok := h.Entry(name)
	if !ok {
		return Tensor{}, fmt.Errorf("safetensors: read tensor %q: not in header", name)
	}
	size := e.End - e.Begin
	truncated := func(n int64, err error) error {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("safetensors: read tensor %q: truncated after %d of %d bytes: %w", name, n, size, err)
	}
	if size > 0 {
		var last [1]byte
		if n, err := ra.ReadAt(last[:], h.DataStart+e.End-1); n != 1 {
			return Tensor{}, truncated(0, err)
		}
	}
	data := make([]byte, size)
	n, err := ra.ReadAt(data, h.DataStart+e.Begin)
	if int64(n) < size {
		return Tensor{}, truncated(int64(n), err)
	}
	return Tensor{Name: e.Name, DType: e.DType, Shape: append([]int(nil), e.Shape...), Data: data}, nil
}

func eofAsUnexpected(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("truncated: %w", io.ErrUnexpectedEOF)
	}
	return err
}
