package hf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/temperml/temper/algorithms/safetensors"
)

// OpenWeights opens the weights of m (read by Inspect from src) as one safetensors stream for
// ReadWeights or an engine's loader: the file itself, or for a sharded model the Join of its
// shards, so a sharded model loads like a single file without a copy on disk or in memory.
func (m *Model) OpenWeights(src Source) (io.ReadCloser, error) {
	if !m.Sharded {
		return src.Open(m.Shards[0])
	}
	return Join(m.Parts(src)...)
}

// Parts are m's weight files as parts of a Join (their headers already read).
func (m *Model) Parts(src Source) []Part {
	parts := make([]Part, len(m.Shards))
	for i, name := range m.Shards {
		parts[i] = Part{Name: name, Open: func() (io.ReadCloser, error) { return src.Open(name) }, header: m.headers[i]}
	}
	return parts
}

// Part is one safetensors file of a Join.
type Part struct {
	Name   string // in errors
	Open   func() (io.ReadCloser, error)
	header *safetensors.Header // when Inspect read it: the file is opened only when its data is reached
}

// Join streams several safetensors files as one: a header listing every tensor (the first file's
// metadata), then each file's data in turn. A part whose header is not known yet is opened now
// and read on from there. Tensor names must be distinct.
func Join(parts ...Part) (io.ReadCloser, error) {
	j := &joined{parts: parts, open: make([]*openPart, len(parts))}
	var entries []safetensors.Entry
	var offset int64
	where := map[string]string{}
	for i := range parts {
		h := parts[i].header
		if h == nil {
			op, err := openPartAt(parts[i])
			if err != nil {
				j.Close()
				return nil, err
			}
			j.open[i], h = op, op.h
		}
		for _, e := range h.Entries {
			if f, dup := where[e.Name]; dup {
				j.Close()
				return nil, badf("hf: tensor %q is in both %s and %s", e.Name, f, parts[i].Name)
			}
			where[e.Name] = parts[i].Name
			e.Begin, e.End = e.Begin+offset, e.End+offset
			entries = append(entries, e)
		}
		offset += h.DataSize
		j.sizes = append(j.sizes, h)
	}
	var meta map[string]string
	if len(j.sizes) > 0 {
		meta = j.sizes[0].Metadata
	}
	hdr, err := safetensors.EncodeHeader(entries, meta)
	if err != nil {
		j.Close()
		return nil, fmt.Errorf("hf: join %d files: %w", len(parts), err)
	}
	j.head = append(binary.LittleEndian.AppendUint64(nil, uint64(len(hdr))), hdr...)
	return j, nil
}

// openPart is a part being read: its header read, positioned at its data.
type openPart struct {
	rc   io.ReadCloser
	data *bufio.Reader
	h    *safetensors.Header
}

func openPartAt(p Part) (*openPart, error) {
	rc, err := p.Open()
	if err != nil {
		return nil, fmt.Errorf("hf: open %s: %w", p.Name, err)
	}
	br := bufio.NewReaderSize(rc, 1<<20)
	h, err := safetensors.ReadHeader(br)
	if err != nil {
		rc.Close()
		return nil, badf("hf: %s: %w", p.Name, err)
	}
	return &openPart{rc: rc, data: br, h: h}, nil
}

// joined streams a header and then the data of each part.
type joined struct {
	parts []Part
	open  []*openPart
	sizes []*safetensors.Header // each part's header as the joined header describes it
	head  []byte
	next  int   // part being read
	left  int64 // its data bytes still to read; -1 before it is started
	err   error
}

func (j *joined) Read(p []byte) (int, error) {
	if j.err != nil {
		return 0, j.err
	}
	for {
		if len(j.head) > 0 {
			n := copy(p, j.head)
			j.head = j.head[n:]
			if len(j.head) == 0 {
				j.left = -1
			}
			return n, nil
		}
		if j.next == len(j.parts) {
			return 0, io.EOF
		}
		if j.left < 0 {
			if j.err = j.start(j.next); j.err != nil {
				return 0, j.err
			}
		}
		name := j.parts[j.next].Name
		if j.left > 0 {
			n, err := j.open[j.next].data.Read(p[:min(int64(len(p)), j.left)])
			j.left -= int64(n)
			if err == io.EOF && j.left > 0 {
				err = badf("hf: %s: truncated: %d bytes of data missing: %w", name, j.left, io.ErrUnexpectedEOF)
			} else if err != nil && err != io.EOF {
				err = fmt.Errorf("hf: %s: %w", name, err)
			}
			if err != nil && err != io.EOF {
				j.err = err
				return n, j.err
			}
			if n > 0 {
				return n, nil
			}
			continue
		}
		if j.err = j.finish(j.next); j.err != nil {
			return 0, j.err
		}
		j.next++
		j.left = -1
	}
}

// start opens part i if it is not open yet: its header must be the one the joined header used.
func (j *joined) start(i int) error {
	if j.open[i] == nil {
		op, err := openPartAt(j.parts[i])
		if err != nil {
			return err
		}
		if op.h.DataSize != j.sizes[i].DataSize || len(op.h.Entries) != len(j.sizes[i].Entries) {
			op.rc.Close()
			return badf("hf: %s changed since its header was read", j.parts[i].Name)
		}
		j.open[i] = op
	}
	j.left = j.sizes[i].DataSize
	return nil
}

// finish checks that part i ends with its data and closes it (a checkpoint's checksum shows then).
func (j *joined) finish(i int) error {
	op := j.open[i]
	j.open[i] = nil
	var one [1]byte
	if n, _ := io.ReadFull(op.data, one[:]); n != 0 {
		op.rc.Close()
		return badf("hf: %s: trailing bytes after its data buffer", j.parts[i].Name)
	}
	if err := op.rc.Close(); err != nil {
		return fmt.Errorf("hf: %s: %w", j.parts[i].Name, err)
	}
	return nil
}

func (j *joined) Close() error {
	for i, op := range j.open {
		if op != nil {
			op.rc.Close()
			j.open[i] = nil
		}
	}
	return nil
}
