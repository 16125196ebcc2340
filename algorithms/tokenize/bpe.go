package tokenize

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// BPE is a byte-level BPE tokenizer loaded from a Hugging Face
// tokenizer.json. It is immutable after LoadHF and safe for concurrent use.
type BPE struct {
	vocab  map[string]int
	tokens []string // id -> text; "" for unused ids
	added  []bool   // id -> is an added token (decoded verbatim)
	merges map[[2]int]mergeRule

	addedByFirst [256][]addedToken // candidates by first byte, longest first
	split        splitter          // nil: no split
	prefixSpace  bool
	nfc          bool
	ignoreMerges bool
	byteFallback bool
	fallbackIDs  [256]int // <0xXX> ids, -1 when absent
	unk          int      // -1 when absent
	special      Special
}

type mergeRule struct{ rank, id int }

type addedToken struct {
	text           string
	id             int
	lstrip, rstrip bool
}

type hfAddedToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	LStrip  bool   `json:"lstrip"`
	RStrip  bool   `json:"rstrip"`
}

type hfModel struct {
	Type                    string            `json:"type"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	UnkToken                *string           `json:"unk_token"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
}

type hfTokenizer struct {
	AddedTokens  []hfAddedToken  `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Model        hfModel         `json:"model"`
}

// hfStep is one normalizer or pre-tokenizer node; fields unused by a type
// stay zero.
type hfStep struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Pattern        struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
}

// LoadHF reads a Hugging Face tokenizer.json holding a byte-level BPE model.
//
// Supported: model.type "BPE" with vocab, merges as "a b" strings or
// ["a","b"] pairs, unk_token, byte_fallback, ignore_merges; added_tokens
// (matched leftmost-longest in the raw text before anything else, honouring
// lstrip/rstrip; single_word and normalized are ignored); normalizer null or
// NFC; pre_tokenizer ByteLevel (use_regex selects the GPT-2 split,
// add_prefix_space is honoured) alone or after one Split whose regex is the
// GPT-2, Llama-3 or Qwen2 pattern with behavior Isolated. Anything else is
// an error, so a tokenizer is never silently approximated. post_processor
// and decoder are ignored: Encode adds no BOS, Decode always inverts the
// byte-level map.
//
// BOS/EOS/PAD are guessed from common added-token names
// (<|begin_of_text|>, <s>, <bos>; <|end_of_text|>, <|endoftext|>, </s>,
// <eos>; <pad>, <|pad|>, [PAD]); use WithSpecial to set them from
// tokenizer_config.json.
func LoadHF(r io.Reader) (*BPE, error) {
	var f hfTokenizer
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, fmt.Errorf("tokenize: load tokenizer.json: %w", err)
	}
	m := f.Model
	if m.Type != "BPE" && !(m.Type == "" && m.Vocab != nil) {
		return nil, fmt.Errorf("tokenize: load tokenizer.json: model type %q, want BPE", m.Type)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" ||
		m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("tokenize: load tokenizer.json: continuing_subword_prefix/end_of_word_suffix unsupported")
	}
	b := &BPE{vocab: m.Vocab, unk: -1, ignoreMerges: m.IgnoreMerges, byteFallback: m.ByteFallback}
	if b.vocab == nil {
		b.vocab = map[string]int{}
	}

	size := 0
	for tok, id := range b.vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenize: load tokenizer.json: vocab %q has negative id %d", tok, id)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return nil, fmt.Errorf("tokenize: load tokenizer.json: added token %q with id %d", a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	if size > 1<<24 {
		return nil, fmt.Errorf("tokenize: load tokenizer.json: vocabulary of %d ids is implausible", size)
	}
	b.tokens = make([]string, size)
	b.added = make([]bool, size)
	seen := make([]bool, size)
	for tok, id := range b.vocab {
		if seen[id] {
			return nil, fmt.Errorf("tokenize: load tokenizer.json: id %d used by %q and %q", id, b.tokens[id], tok)
		}
		seen[id] = true
		b.tokens[id] = tok
	}

	var named []SpecialToken
	for _, a := range f.AddedTokens {
		b.tokens[a.ID] = a.Content
		b.added[a.ID] = true
		named = append(named, SpecialToken{Text: a.Content, ID: a.ID})
		c := a.Content[0]
		b.addedByFirst[c] = append(b.addedByFirst[c], addedToken{text: a.Content, id: a.ID, lstrip: a.LStrip, rstrip: a.RStrip})
	}
	for _, list := range &b.addedByFirst {
		sortLongestFirst(list)
	}

	if m.UnkToken != nil {
		id, ok := b.lookup(*m.UnkToken)
		if !ok {
			return nil, fmt.Errorf("tokenize: load tokenizer.json: unk_token %q not in vocab", *m.UnkToken)
		}
		b.unk = id
	}
	for i := range b.fallbackIDs {
		b.fallbackIDs[i] = -1
		if id, ok := b.vocab[fmt.Sprintf("<0x%02X>", i)]; ok {
			b.fallbackIDs[i] = id
		}
	}

	if err := b.parseMerges(m.Merges); err != nil {
		return nil, err
	}
	if err := b.parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := b.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}

	pick := func(names ...string) int {
		for _, n := range names {
			for _, t := range named {
				if t.Text == n {
					return t.ID
				}
			}
		}
		return -1
	}
	bos := pick("<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>")
	eos := pick("<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>")
	pad := pick("<pad>", "<|pad|>", "[PAD]")
	b.special = NewSpecial(bos, eos, pad, named)
	return b, nil
}

func sortLongestFirst(list []addedToken) {
	for i := 1; i < len(list); i++ { // insertion sort: stable, lists are short
		for j := i; j > 0 && len(list[j].text) > len(list[j-1].text); j-- {
			list[j], list[j-1] = list[j-1], list[j]
		}
	}
}

// lookup finds an added token, else a vocab entry.
func (b *BPE) lookup(tok string) (int, bool) {
	for _, list := range b.addedByFirst[firstByte(tok)] {
		if list.text == tok {
			return list.id, true
		}
	}
	id, ok := b.vocab[tok]
	return id, ok
}

func firstByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[0]
}

func (b *BPE) parseMerges(raw []json.RawMessage) error {
	b.merges = make(map[[2]int]mergeRule, len(raw))
	for rank, r := range raw {
		var left, right string
		var line string
		var pair []string
		switch {
		case len(r) > 0 && r[0] == '"' && json.Unmarshal(r, &line) == nil:
			parts := strings.Split(line, " ")
			if len(parts) != 2 {
				return fmt.Errorf("tokenize: load tokenizer.json: merge %d %q is not two space-separated tokens", rank, line)
			}
			left, right = parts[0], parts[1]
		case len(r) > 0 && r[0] == '[' && json.Unmarshal(r, &pair) == nil && len(pair) == 2:
			left, right = pair[0], pair[1]
		default:
			return fmt.Errorf("tokenize: load tokenizer.json: merge %d %s is neither \"a b\" nor [\"a\",\"b\"]", rank, r)
		}
		l, okL := b.vocab[left]
		rr, okR := b.vocab[right]
		id, okM := b.vocab[left+right]
		if !okL || !okR || !okM {
			return fmt.Errorf("tokenize: load tokenizer.json: merge %d (%q, %q) uses a token not in vocab", rank, left, right)
		}
		if _, dup := b.merges[[2]int{l, rr}]; !dup { // the first (best) rank wins
			b.merges[[2]int{l, rr}] = mergeRule{rank: rank, id: id}
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func (b *BPE) parseNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var n hfStep
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("tokenize: load tokenizer.json: normalizer: %w", err)
	}
	switch n.Type {
	case "NFC":
		b.nfc = true
		return nil
	case "Sequence":
		for _, s := range n.Normalizers {
			if err := b.parseNormalizer(s); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("tokenize: load tokenizer.json: normalizer %q unsupported (only NFC)", n.Type)
}

func (b *BPE) parsePreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("tokenize: load tokenizer.json: no pre_tokenizer; byte-level BPE needs ByteLevel")
	}
	var steps []hfStep
	var flatten func(raw json.RawMessage) error
	flatten = func(raw json.RawMessage) error {
		var s hfStep
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: %w", err)
		}
		if s.Type != "Sequence" {
			steps = append(steps, s)
			return nil
		}
		for _, p := range s.Pretokenizers {
			if err := flatten(p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := flatten(raw); err != nil {
		return err
	}
	byteLevel := false
	for _, s := range steps {
		switch s.Type {
		case "Split":
			if byteLevel || b.split != nil {
				return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: Split must come once, before ByteLevel")
			}
			if s.Pattern.Regex == nil {
				return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: Split without a Regex pattern unsupported")
			}
			if s.Behavior != "Isolated" || s.Invert {
				return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: Split behavior %q invert %v unsupported", s.Behavior, s.Invert)
			}
			sp, ok := splitterFor(*s.Pattern.Regex)
			if !ok {
				return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: Split regex %q is not the GPT-2, Llama-3 or Qwen2 pattern", *s.Pattern.Regex)
			}
			b.split = sp
		case "ByteLevel":
			if byteLevel {
				return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: ByteLevel twice")
			}
			byteLevel = true
			b.prefixSpace = s.AddPrefixSpace
			if s.UseRegex == nil || *s.UseRegex { // HF's default is true
				if b.split != nil {
					return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer: Split followed by ByteLevel with use_regex unsupported")
				}
				b.split = splitGPT2
			}
		default:
			return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer %q unsupported", s.Type)
		}
	}
	if !byteLevel {
		return fmt.Errorf("tokenize: load tokenizer.json: pre_tokenizer has no ByteLevel step")
	}
	return nil
}

// WithSpecial returns a copy whose BOS/EOS/PAD are the named tokens (as in
// tokenizer_config.json); "" means none.
func (b *BPE) WithSpecial(bos, eos, pad string) (*BPE, error) {
	ids := [3]int{-1, -1, -1}
	for i, name := range []string{bos, eos, pad} {
		if name == "" {
			continue
		}
		id, ok := b.lookup(name)
		if !ok {
			return nil, fmt.Errorf("tokenize: with special: token %q not in vocabulary", name)
		}
		ids[i] = id
	}
	c := *b
	c.special = Special{BOS: ids[0], EOS: ids[1], PAD: ids[2], named: b.special.named}
	return &c, nil
}

// VocabSize is one more than the largest id in vocab or added tokens.
func (b *BPE) VocabSize() int { return len(b.tokens) }

// Special reports BOS/EOS/PAD and the added tokens by name.
func (b *BPE) Special() Special { return b.special }

// Encode tokenises text: added tokens first, then normalise, split, map
// bytes and merge each pre-token.
func (b *BPE) Encode(text string) []int {
	var ids []int
	start := 0 // start of the pending ordinary segment
	for i := 0; i < len(text); {
		t, ok := b.matchAdded(text[i:])
		if !ok {
			i++
			continue
		}
		segEnd, next := i, i+len(t.text)
		if t.lstrip {
			for segEnd > start {
				r, n := utf8.DecodeLastRuneInString(text[start:segEnd])
				if !unicode.IsSpace(r) {
					break
				}
				segEnd -= n
			}
		}
		if t.rstrip {
			next += runOf(text[next:], unicode.IsSpace)
		}
		ids = b.encodeOrdinary(ids, text[start:segEnd])
		ids = append(ids, t.id)
		start, i = next, next
	}
	return b.encodeOrdinary(ids, text[start:])
}

// matchAdded finds the longest added token at the start of s.
func (b *BPE) matchAdded(s string) (addedToken, bool) {
	for _, t := range b.addedByFirst[s[0]] {
		if strings.HasPrefix(s, t.text) {
			return t, true
		}
	}
	return addedToken{}, false
}

func (b *BPE) encodeOrdinary(ids []int, s string) []int {
	if s == "" {
		return ids
	}
	if b.nfc {
		s = norm.NFC.String(s)
	}
	if b.prefixSpace && s[0] != ' ' {
		s = " " + s
	}
	if b.split == nil {
		return b.encodeWord(ids, byteLevelMap(s))
	}
	for _, w := range b.split(s) {
		ids = b.encodeWord(ids, byteLevelMap(w))
	}
	return ids
}

// symbol is one node of the doubly linked list a word is merged on.
type symbol struct {
	id         int
	prev, next int
	dead       bool
}

type candidate struct {
	rank, left, right int
	leftID, rightID   int
}

type candidates []candidate

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].left < c[j].left
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// encodeWord merges one byte-level-mapped pre-token: always the
// lowest-rank adjacent pair, leftmost on ties (as HF does), in O(n log n).
func (b *BPE) encodeWord(ids []int, word string) []int {
	if b.ignoreMerges {
		if id, ok := b.vocab[word]; ok {
			return append(ids, id)
		}
	}
	syms := make([]symbol, 0, len(word))
	for _, r := range word {
		s := string(r)
		if id, ok := b.vocab[s]; ok {
			syms = append(syms, symbol{id: id})
			continue
		}
		if b.byteFallback && b.allFallback(s) {
			for i := 0; i < len(s); i++ {
				syms = append(syms, symbol{id: b.fallbackIDs[s[i]]})
			}
			continue
		}
		if b.unk >= 0 {
			syms = append(syms, symbol{id: b.unk})
		}
		// No vocab entry, fallback or unk: HF drops the character too.
	}
	for i := range syms {
		syms[i].prev, syms[i].next = i-1, i+1
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}

	var q candidates
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		if m, ok := b.merges[[2]int{syms[l].id, syms[r].id}]; ok {
			heap.Push(&q, candidate{rank: m.rank, left: l, right: r, leftID: syms[l].id, rightID: syms[r].id})
		}
	}
	for i := 0; i+1 < len(syms); i++ {
		try(i, i+1)
	}
	for q.Len() > 0 {
		c := heap.Pop(&q).(candidate)
		l, r := &syms[c.left], &syms[c.right]
		if l.dead || r.dead || l.next != c.right || l.id != c.leftID || r.id != c.rightID {
			continue // stale: a neighbour merged first
		}
		l.id = b.merges[[2]int{c.leftID, c.rightID}].id
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.dead = true
		try(l.prev, c.left)
		try(c.left, l.next)
	}
	for i := 0; i >= 0 && i < len(syms); i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

func (b *BPE) allFallback(s string) bool {
	for i := 0; i < len(s); i++ {
		if b.fallbackIDs[s[i]] < 0 {
			return false
		}
	}
	return true
}

// Decode inverts Encode: vocab tokens are un-mapped from the byte-level
// alphabet, added tokens are written verbatim, <0xXX> byte-fallback tokens
// contribute their byte, and unknown ids are skipped.
func (b *BPE) Decode(ids []int) string {
	var out, pending []byte
	flush := func() {
		out = byteLevelUnmap(out, pending)
		pending = pending[:0]
	}
	for _, id := range ids {
		if id < 0 || id >= len(b.tokens) || b.tokens[id] == "" {
			continue
		}
		tok := b.tokens[id]
		switch {
		case b.added[id]:
			flush()
			out = append(out, tok...)
		case b.byteFallback && isByteToken(tok):
			pending = append(pending, hexByte(tok))
		default:
			pending = append(pending, tok...)
		}
	}
	flush()
	return string(out)
}

// isByteToken reports whether tok is "<0xXX>".
func isByteToken(tok string) bool {
	return len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' && isHex(tok[3]) && isHex(tok[4])
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f' }

func hexByte(tok string) byte {
	v := func(c byte) byte {
		switch {
		case c <= '9':
			return c - '0'
		case c <= 'F':
			return c - 'A' + 10
		}
		return c - 'a' + 10
	}
	return v(tok[3])<<4 | v(tok[4])
}
