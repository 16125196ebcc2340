package hf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// File names of a Hugging Face model directory and of a PEFT adapter directory.
const (
	ConfigFile           = "config.json"
	GenerationConfigFile = "generation_config.json"
	WeightsFile          = "model.safetensors"
	IndexFile            = "model.safetensors.index.json"
	AdapterConfigFile    = "adapter_config.json"
	AdapterWeightsFile   = "adapter_model.safetensors"
)

// SideFiles are the files of a model directory besides config.json and the weights that Temper
// carries verbatim from a loaded model to every directory and checkpoint written from it: the
// generation defaults and what tokenizers and chat templates read.
var SideFiles = []string{GenerationConfigFile, "tokenizer.json", "tokenizer_config.json",
	"special_tokens_map.json", "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
	"chat_template.jinja", "chat_template.json"}

// Source is a directory to read: a local folder, a checkpoint, a bucket prefix.
type Source interface {
	// Open opens a file; a missing one gives an error wrapping fs.ErrNotExist.
	Open(name string) (io.ReadCloser, error)
	// Has reports whether the file exists.
	Has(name string) (bool, error)
}

// Sink is a directory to write. A file exists once its writer is closed without error.
type Sink interface {
	Create(name string) (io.WriteCloser, error)
}

// FS reads a directory through an fs.FS (os.DirFS for a local folder).
func FS(fsys fs.FS) Source { return fsSource{fsys} }

type fsSource struct{ fsys fs.FS }

func (s fsSource) Open(name string) (io.ReadCloser, error) { return s.fsys.Open(name) }

func (s fsSource) Has(name string) (bool, error) {
	_, err := fs.Stat(s.fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// readAll reads a whole (small) file.
func readAll(src Source, name string) ([]byte, error) {
	rc, err := src.Open(name)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr // a checkpoint's checksum mismatch shows at Close
	}
	if err != nil {
		return nil, fmt.Errorf("hf: read %s: %w", name, err)
	}
	return b, nil
}

// writeFile creates name in dst and fills it with write.
func writeFile(dst Sink, name string, write func(io.Writer) error) error {
	w, err := dst.Create(name)
	if err != nil {
		return fmt.Errorf("hf: create %s: %w", name, err)
	}
	if err := write(w); err != nil {
		if a, ok := w.(interface{ Abort() }); ok {
			a.Abort()
		} else {
			w.Close()
		}
		return fmt.Errorf("hf: write %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("hf: write %s: %w", name, err)
	}
	return nil
}

// copyFile copies name from src to dst verbatim.
func copyFile(dst Sink, src Source, name string) error {
	rc, err := src.Open(name)
	if err != nil {
		return fmt.Errorf("hf: copy %s: %w", name, err)
	}
	defer rc.Close()
	return writeFile(dst, name, func(w io.Writer) error {
		if _, err := io.Copy(w, rc); err != nil {
			return err
		}
		return rc.Close()
	})
}

// ErrFormat is wrapped by every error about the files' content (a config field, a shape, a dtype, a
// missing tensor or shard, a truncated or malformed file), as opposed to failing I/O: callers
// treat the first as bad input that retrying cannot fix.
var ErrFormat = errors.New("hf: malformed model files")

type formatError struct{ err error }

func (e formatError) Error() string        { return e.err.Error() }
func (e formatError) Unwrap() error        { return e.err }
func (e formatError) Is(target error) bool { return target == ErrFormat }

// badf is fmt.Errorf for an error about the files' content (ErrFormat).
func badf(format string, a ...any) error { return formatError{fmt.Errorf(format, a...)} }
