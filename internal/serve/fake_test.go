package serve

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/tokenize"
)

// scriptEngine is an Engine whose rows write a script: row r's k-th token is script(prompt)[k]
// (then the stop id forever). It records what the scheduler asked of it.
type scriptEngine struct {
	vocab  int
	stop   int
	script func(prompt []int) []int

	mu      sync.Mutex
	rows    map[int]*scriptRow
	next    int
	joins   [][]int // ids of each Join call
	maxLive int
	gate    chan struct{} // when set, each Step waits for a value
	failAt  int           // when > 0, the failAt-th Step fails
	delay   time.Duration // each Step takes this long
	steps   int
}

func (e *scriptEngine) stepCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.steps
}

type scriptRow struct {
	script []int
	pos    int
}

func (e *scriptEngine) logits(r *scriptRow, out []float32) {
	tok := e.stop
	if r.pos < len(r.script) {
		tok = r.script[r.pos]
	}
	for i := range out {
		out[i] = float32(i%7) * 0.01
	}
	out[tok] = 30
}

func (e *scriptEngine) Join(prompts [][]int) ([]int, []float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.rows == nil {
		e.rows = map[int]*scriptRow{}
	}
	ids := make([]int, len(prompts))
	lg := make([]float32, len(prompts)*e.vocab)
	for i, p := range prompts {
		r := &scriptRow{script: e.script(p)}
		ids[i] = e.next
		e.rows[e.next] = r
		e.next++
		e.logits(r, lg[i*e.vocab:(i+1)*e.vocab])
	}
	e.joins = append(e.joins, ids)
	e.maxLive = max(e.maxLive, len(e.rows))
	return ids, lg, nil
}

func (e *scriptEngine) Step(ids, tokens []int) ([]float32, error) {
	if e.gate != nil {
		<-e.gate
	}
	time.Sleep(e.delay)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.steps++
	if e.failAt > 0 && e.steps == e.failAt {
		return nil, fmt.Errorf("scripted failure at step %d", e.steps)
	}
	if len(ids) != len(e.rows) {
		return nil, fmt.Errorf("step fed %d rows, %d live", len(ids), len(e.rows))
	}
	lg := make([]float32, len(ids)*e.vocab)
	for i, id := range ids {
		r, ok := e.rows[id]
		if !ok {
			return nil, fmt.Errorf("no row %d", id)
		}
		r.pos++
		e.logits(r, lg[i*e.vocab:(i+1)*e.vocab])
	}
	return lg, nil
}

func (e *scriptEngine) Leave(id int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.rows[id]; !ok {
		return fmt.Errorf("no row %d", id)
	}
	delete(e.rows, id)
	return nil
}

func (e *scriptEngine) live() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.rows)
}

// qwen3Dir writes a model directory with the real Qwen3 tokenizer and chat template (from the
// tokenizer and chat goldens' testdata).
func qwen3Dir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	gz, err := os.ReadFile("../../algorithms/tokenize/testdata/hf/qwen3.tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := os.ReadFile("../../algorithms/chat/testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// qwen3Model loads qwen3Dir as a model of the tokenizer's vocabulary.
func qwen3Model(t testing.TB) *Model {
	t.Helper()
	dir := qwen3Dir(t)
	m, err := LoadModel(dir, "qwen3-script", model.Config{Vocab: 151936, MaxSeq: 4096}, ChatSpec{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// byteScript is a script engine for the byte tokenizer writing text then EOS.
func byteScript(text func(prompt []int) string) *scriptEngine {
	return &scriptEngine{vocab: tokenize.ByteVocabSize, stop: tokenize.ByteEOS, script: func(p []int) []int {
		return tokenize.Byte{}.Encode(text(p))
	}}
}

func byteModel(t testing.TB, maxSeq int) *Model {
	t.Helper()
	m, err := ByteModel("bytes", model.Config{Vocab: tokenize.ByteVocabSize, MaxSeq: maxSeq, Layers: 1, KVHeads: 1, HeadDim: 4})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func equalInts(a, b []int) bool { return slices.Equal(a, b) }
