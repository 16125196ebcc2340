package data

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// builtinDigest encodes every built-in task's train split (as text, prompt/completion and, for
// agentic tasks, the tool-use demonstrations as conversations) with the byte-level encoder and
// hashes the ids and loss masks.
func builtinDigest(t *testing.T, enc Encoder) string {
	h := sha256.New()
	put := func(v uint32) {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		h.Write(b[:])
	}
	n := 0
	for _, name := range tasks.Names() {
		if addedSince[name] {
			continue
		}
		task, err := tasks.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		train, _ := tasks.Split(task, 64, 0, 7)
		sets := [][]tasks.Example{train}
		if demos, err := tasks.Demonstrations(task, train); err == nil {
			sets = append(sets, demos)
		}
		for _, set := range sets {
			for _, ex := range set {
				e, err := enc.Encode(ex)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				put(uint32(len(e.IDs)))
				for i, id := range e.IDs {
					put(uint32(id))
					if e.Loss[i] {
						put(1)
					} else {
						put(0)
					}
				}
				p, err := enc.PromptIDs(ex)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, id := range p {
					put(uint32(id))
				}
				n++
			}
		}
	}
	return fmt.Sprintf("%d examples %x", n, h.Sum(nil))
}

// addedSince are the tasks registered after mainDigest was taken: they had no encoding before.
var addedSince = map[string]bool{"smallmul": true}

// mainDigest is builtinDigest on main before chat formats rendered text (commit 51b0a4b, piece by
// piece): the byte-level models' data must encode exactly as it did.
const mainDigest = "1344 examples 15b8837ad72975adfa3735fd992bb8cc8b2379347daf156e13c89721ffa3653e"

// TestBuiltinDataEncodesAsBefore: every built-in task's SFT data, the demo's included, encodes
// to the same ids, masks and prompts as before the fixed chat formats went through rendered text.
func TestBuiltinDataEncodesAsBefore(t *testing.T) {
	enc := Encoder{Tok: tokenize.Byte{}, Chat: tokenize.DefaultChat(), BOS: true}
	if got := builtinDigest(t, enc); got != mainDigest {
		t.Fatalf("digest %s, want %s", got, mainDigest)
	}
}
