package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// bpeModel is HF's BPE model: a word's characters (byte-fallback bytes or unk when not in
// the vocabulary) merged pairwise by rank.
type bpeModel struct {
	vocab        map[string]int
	vocabR       []string             // id -> token; "" for ids the model lacks
	merges       map[uint64]mergeRule // key: pairKey(left, right)
	unk          int                  // -1 when none
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	fallbackIDs  [256]int // <0xXX> ids, -1 when absent
	// runeIDs caches the ids of single characters below 0x200 (every byte-level character):
	// the hot lookup of byte-level BPE, without building a string per character.
	runeIDs [0x200]int32
	cache   *wordCache
}

// wordCache remembers the tokens of short words, as HF's BPE cache does: natural text repeats
// its words, and merging is the expensive part of encoding.
type wordCache struct {
	mu    sync.RWMutex
	words map[string][]bpeToken
}

const (
	cacheWords  = 10000 // HF's default capacity
	cacheMaxLen = 256   // HF's MAX_LENGTH: longer words are not cached
)

type mergeRule struct{ rank, id int }

// pairKey packs a pair of ids into a map key that hashes faster than [2]int.
func pairKey(l, r int) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// bpeToken is one model token and its byte span in the word.
type bpeToken struct{ id, start, end int }

func (m *bpeModel) build(f *hfModel) error {
	if f.Type != "BPE" && !(f.Type == "" && f.Vocab != nil) {
		return fmt.Errorf("model type %q unsupported (supported: BPE)", f.Type)
	}
	if f.Dropout != nil && *f.Dropout != 0 {
		return fmt.Errorf("model dropout %v unsupported (encoding would be random): set it to null", *f.Dropout)
	}
	if f.ContinuingSubwordPrefix != nil && *f.ContinuingSubwordPrefix != "" ||
		f.EndOfWordSuffix != nil && *f.EndOfWordSuffix != "" {
		return fmt.Errorf("model continuing_subword_prefix/end_of_word_suffix unsupported (supported: null or \"\")")
	}
	m.vocab = f.Vocab
	if m.vocab == nil {
		m.vocab = map[string]int{}
	}
	m.unk, m.fuseUnk, m.byteFallback, m.ignoreMerges = -1, f.FuseUnk, f.ByteFallback, f.IgnoreMerges
	m.cache = &wordCache{words: map[string][]bpeToken{}}
	size := 0
	for tok, id := range m.vocab {
		if id < 0 {
			return fmt.Errorf("vocab %q has negative id %d", tok, id)
		}
		size = max(size, id+1)
	}
	if size > 1<<24 {
		return fmt.Errorf("vocabulary of %d ids is implausible", size)
	}
	m.vocabR = make([]string, size)
	for tok, id := range m.vocab {
		if m.vocabR[id] != "" || tok == "" {
			return fmt.Errorf("id %d used by %q and %q", id, m.vocabR[id], tok)
		}
		m.vocabR[id] = tok
	}
	for i := range m.runeIDs {
		m.runeIDs[i] = -1
		if id, ok := m.vocab[string(rune(i))]; ok {
			m.runeIDs[i] = int32(id)
		}
	}
	if f.UnkToken != nil {
		id, ok := m.vocab[*f.UnkToken]
		if !ok {
			return fmt.Errorf("unk_token %q not in vocab", *f.UnkToken)
		}
		m.unk = id
	}
	for i := range m.fallbackIDs {
		m.fallbackIDs[i] = -1
		if id, ok := m.vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			m.fallbackIDs[i] = id
		}
	}
	return m.parseMerges(f.Merges)
}

// parseMerges reads merges in either JSON form. As in HF (a HashMap built in order), a pair
// listed twice keeps its last rank.
func (m *bpeModel) parseMerges(raw []json.RawMessage) error {
	m.merges = make(map[uint64]mergeRule, len(raw))
	for rank, r := range raw {
		var left, right, line string
		var pair []string
		switch {
		case len(r) > 0 && r[0] == '"' && json.Unmarshal(r, &line) == nil:
			parts := strings.Split(line, " ")
			if len(parts) != 2 {
				return fmt.Errorf("merge %d %q is not two space-separated tokens", rank, line)
			}
			left, right = parts[0], parts[1]
		case len(r) > 0 && r[0] == '[' && json.Unmarshal(r, &pair) == nil && len(pair) == 2:
			left, right = pair[0], pair[1]
		default:
			return fmt.Errorf("merge %d %s is neither \"a b\" nor [\"a\",\"b\"]", rank, r)
		}
		l, okL := m.vocab[left]
		rr, okR := m.vocab[right]
		id, okM := m.vocab[left+right]
		if !okL || !okR || !okM {
			return fmt.Errorf("merge %d (%q, %q) uses a token not in vocab", rank, left, right)
		}
		m.merges[pairKey(l, rr)] = mergeRule{rank: rank, id: id}
	}
	return nil
}

// symbol is one node of the linked list a word is merged on; size is its byte length (HF
// derives offsets from the running sum of these).
type symbol struct {
	id         int
	prev, next int
	size       int
}

type candidate struct{ rank, pos, newID, left, right int }

// candHeap is a min-heap by (rank, pos): the lowest rank, leftmost on ties, as HF's.
type candHeap []candidate

func (h candHeap) less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}

func (h *candHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candHeap) pop() candidate {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s.less(l, m) {
			m = l
		}
		if r < n && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// charID looks up one character of w.
func (m *bpeModel) charID(w string, r rune, size, i int) (int, bool) {
	if r < 0x200 && size == utf8.RuneLen(r) {
		id := m.runeIDs[r]
		return int(id), id >= 0
	}
	id, ok := m.vocab[w[i:i+size]]
	return id, ok
}

// tokenize is HF's BPE::tokenize of one word (merge_word, then merge_all).
func (m *bpeModel) tokenize(w string, out []bpeToken) []bpeToken {
	if m.ignoreMerges {
		if id, ok := m.vocab[w]; ok {
			return append(out, bpeToken{id: id, start: 0, end: len(w)})
		}
	}
	if m.cache == nil || len(w) >= cacheMaxLen {
		return m.merge(w, out)
	}
	m.cache.mu.RLock()
	hit, ok := m.cache.words[w]
	m.cache.mu.RUnlock()
	if ok {
		return append(out, hit...)
	}
	start := len(out)
	out = m.merge(w, out)
	m.cache.mu.Lock()
	if len(m.cache.words) < cacheWords {
		m.cache.words[strings.Clone(w)] = append([]bpeToken(nil), out[start:]...)
	}
	m.cache.mu.Unlock()
	return out
}

// merge tokenises w without the cache.
func (m *bpeModel) merge(w string, out []bpeToken) []bpeToken {
	syms := make([]symbol, 0, len(w))
	add := func(id, size int) { syms = append(syms, symbol{id: id, size: size}) }
	unkID, unkLen := -1, 0
	for i := 0; i < len(w); {
		r, size := utf8.DecodeRuneInString(w[i:])
		if id, ok := m.charID(w, r, size, i); ok {
			if unkID >= 0 {
				add(unkID, unkLen)
				unkID = -1
			}
			add(id, size)
			i += size
			continue
		}
		if m.byteFallback && m.allFallback(w[i:i+size]) {
			for k := 0; k < size; k++ { // HF does not flush a pending unk first
				add(m.fallbackIDs[w[i+k]], 1)
			}
			i += size
			continue
		}
		if m.unk >= 0 {
			switch {
			case unkID >= 0 && m.fuseUnk:
				unkLen += size
			case unkID >= 0:
				add(unkID, unkLen)
				unkID, unkLen = m.unk, size
			default:
				unkID, unkLen = m.unk, size
			}
		}
		// No vocab entry, fallback or unk: HF drops the character.
		i += size
	}
	if unkID >= 0 {
		add(unkID, unkLen)
	}
	for i := range syms {
		syms[i].prev, syms[i].next = i-1, i+1
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	if len(syms) > 1 && len(m.merges) > 0 {
		m.mergeAll(syms)
	}
	pos := 0
	for i := 0; i < len(syms); i++ {
		if syms[i].size == 0 {
			continue
		}
		out = append(out, bpeToken{id: syms[i].id, start: pos, end: pos + syms[i].size})
		pos += syms[i].size
	}
	return out
}

// mergeAll is HF's Word::merge_all without dropout: a merged-away symbol gets size 0, and a
// queue entry is stale unless the pair now at its position still merges into its new id.
func (m *bpeModel) mergeAll(syms []symbol) {
	q := make(candHeap, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if mr, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q.push(candidate{rank: mr.rank, pos: i, newID: mr.id, left: syms[i].id, right: syms[i+1].id})
		}
	}
	for len(q) > 0 {
		top := q.pop()
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next < 0 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		// The pair the entry was queued for merges into newID; any other pair must too.
		if cur.id != top.left || right.id != top.right {
			if mr, ok := m.merges[pairKey(cur.id, right.id)]; !ok || mr.id != top.newID {
				continue
			}
		}
		cur.id = top.newID
		cur.size += right.size
		cur.next = right.next
		syms[nextPos].size = 0
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mr, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				q.push(candidate{rank: mr.rank, pos: cur.prev, newID: mr.id, left: syms[cur.prev].id, right: cur.id})
			}
		}
		if cur.next >= 0 {
			if mr, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				q.push(candidate{rank: mr.rank, pos: top.pos, newID: mr.id, left: cur.id, right: syms[cur.next].id})
			}
		}
	}
}

func (m *bpeModel) allFallback(s string) bool {
	for i := 0; i < len(s); i++ {
		if m.fallbackIDs[s[i]] < 0 {
			return false
		}
	}
	return true
}
