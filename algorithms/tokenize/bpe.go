package tokenize

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// BPE is a Hugging Face tokenizer.json tokenizer with a BPE model: byte-level (GPT-2,
// Llama 3, Qwen, DeepSeek, o200k) or SentencePiece-style (Gemma, Llama 2: ▁ for spaces,
// byte_fallback). It runs HF's pipeline step by step: added tokens, normalizer,
// pre-tokenizer, model, post-processor; and decoders for Decode. It is immutable after
// LoadHF and safe for concurrent use.
type BPE struct {
	model      bpeModel
	added      addedVocab
	normalizer normalizer    // nil: none
	pre        preTokenizer  // nil: none
	post       postProcessor // nil: none
	decoder    decoderStep   // nil: tokens joined by " ", as HF does
	// needOrig: some step (Metaspace prepend_scheme "first") asks where a piece starts in the
	// input, so spans are tracked even when offsets are not wanted.
	needOrig bool
	tokens   []string // id -> text Decode starts from; "" for unused ids
	special  Special
}

type hfAddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type hfModel struct {
	Type                    string            `json:"type"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
}

type hfTokenizer struct {
	Version       *string         `json:"version"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         hfModel         `json:"model"`
}

// LoadHF reads a Hugging Face tokenizer.json whose model is BPE.
//
// Supported, with HF's semantics (checked against the Rust tokenizers on real files):
// normalizers NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace, Sequence;
// pre-tokenizers Split (String or Oniguruma regex, every behavior, invert), ByteLevel,
// Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit, CharDelimiterSplit,
// Sequence; the BPE model with vocab, merges as "a b" or ["a","b"], unk_token, fuse_unk,
// byte_fallback, ignore_merges; post-processors TemplateProcessing (single sequence),
// ByteLevel, Sequence; decoders ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
// BPEDecoder, Sequence; added tokens with single_word, lstrip, rstrip, normalized and special.
// Anything else (another model type, dropout, a continuing-subword prefix, truncation or
// padding, an unknown component) is an error naming it, so a tokenizer is never silently
// approximated.
//
// BOS/EOS/PAD are guessed from common added-token names (<|begin_of_text|>, <s>, <bos>;
// <|end_of_text|>, <|endoftext|>, </s>, <eos>; <pad>, <|pad|>, [PAD]); WithConfig sets
// them from tokenizer_config.json.
func LoadHF(r io.Reader) (*BPE, error) {
	var f hfTokenizer
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, fmt.Errorf("tokenize: load tokenizer.json: %w", err)
	}
	b, err := buildHF(&f)
	if err != nil {
		return nil, fmt.Errorf("tokenize: load tokenizer.json: %w", err)
	}
	return b, nil
}

func buildHF(f *hfTokenizer) (*BPE, error) {
	if f.Version != nil && *f.Version != "1.0" {
		return nil, fmt.Errorf("version %q unsupported (want 1.0)", *f.Version)
	}
	if !isNull(f.Truncation) {
		return nil, fmt.Errorf("truncation is set; unsupported (Encode never truncates: set it to null)")
	}
	if !isNull(f.Padding) {
		return nil, fmt.Errorf("padding is set; unsupported (Encode never pads: set it to null)")
	}
	b := &BPE{}
	if err := b.model.build(&f.Model); err != nil {
		return nil, err
	}
	var err error
	if !isNull(f.Normalizer) {
		if b.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
			return nil, err
		}
	}
	if !isNull(f.PreTokenizer) {
		if b.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
			return nil, err
		}
		b.needOrig = needsOrigin(b.pre)
	}
	if !isNull(f.PostProcessor) {
		if b.post, err = parsePostProcessor(f.PostProcessor); err != nil {
			return nil, err
		}
	}
	if !isNull(f.Decoder) {
		if b.decoder, err = parseDecoder(f.Decoder); err != nil {
			return nil, err
		}
	}
	if err := b.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}

	size := len(b.model.vocabR)
	for _, t := range b.added.tokens {
		size = max(size, t.id+1)
	}
	if size > 1<<24 {
		return nil, fmt.Errorf("vocabulary of %d ids is implausible", size)
	}
	b.tokens = make([]string, size)
	copy(b.tokens, b.model.vocabR)
	var named []SpecialToken
	for _, t := range b.added.tokens {
		b.tokens[t.id] = t.decoded
		named = append(named, SpecialToken{Text: t.text, ID: t.id})
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

// needsOrigin reports a Metaspace with prepend_scheme "first", which asks whether a piece
// starts the input.
func needsOrigin(p preTokenizer) bool {
	switch p := p.(type) {
	case preMetaspace:
		return p.scheme == prependFirst
	case preSeq:
		for _, x := range p {
			if needsOrigin(x) {
				return true
			}
		}
	}
	return false
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// addTokens registers added tokens as HF's AddedVocabulary::add_tokens does: a token's id is
// its model id when the model knows its content, else the next free id; tokens with
// normalized=true are matched (and decoded) in their normalised form.
func (b *BPE) addTokens(list []hfAddedToken) error {
	byText := map[string]int{}
	next := len(b.model.vocab) // HF computes the next free id once, before adding the list
	for _, a := range list {
		if a.Content == "" {
			return fmt.Errorf("added token with id %d has empty content", a.ID)
		}
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		id, ok := byText[a.Content]
		if !ok {
			id, ok = b.model.vocab[a.Content]
		}
		if !ok {
			id = next
			next++
		}
		if id != a.ID {
			return fmt.Errorf("added token %q declares id %d but Hugging Face assigns it %d", a.Content, a.ID, id)
		}
		t := addedToken{text: a.Content, id: id, lstrip: a.LStrip, rstrip: a.RStrip, singleWord: a.SingleWord,
			normalized: normalized, special: a.Special, pattern: a.Content, decoded: a.Content}
		if normalized && b.normalizer != nil {
			n := newNormString(a.Content, 0, false)
			b.normalizer.normalize(&n)
			t.pattern, t.decoded = n.s, n.s
		}
		if prev, dup := byText[a.Content]; dup {
			for i := range b.added.tokens {
				if b.added.tokens[i].id == prev {
					b.added.tokens[i] = t
				}
			}
			continue
		}
		byText[a.Content] = id
		b.added.tokens = append(b.added.tokens, t)
	}
	b.added.build()
	return nil
}

// WithSpecial returns a copy whose BOS/EOS/PAD are the named tokens; "" means none.
func (b *BPE) WithSpecial(bos, eos, pad string) (*BPE, error) {
	ids := [3]int{-1, -1, -1}
	for i, name := range []string{bos, eos, pad} {
		if name == "" {
			continue
		}
		id, ok := b.TokenID(name)
		if !ok {
			return nil, fmt.Errorf("tokenize: with special: token %q not in vocabulary", name)
		}
		ids[i] = id
	}
	c := *b
	c.special = Special{BOS: ids[0], EOS: ids[1], PAD: ids[2], named: b.special.named}
	return &c, nil
}

// TokenID finds an added token, else a model vocabulary entry, by its text.
func (b *BPE) TokenID(tok string) (int, bool) {
	for _, t := range b.added.tokens {
		if t.text == tok {
			return t.id, true
		}
	}
	id, ok := b.model.vocab[tok]
	return id, ok
}

// VocabSize is one more than the largest id in vocab or added tokens.
func (b *BPE) VocabSize() int { return len(b.tokens) }

// Special reports BOS/EOS/PAD and the added tokens by name.
func (b *BPE) Special() Special { return b.special }

// Encode tokenises text as HF's encode(text, add_special_tokens=False).
func (b *BPE) Encode(text string) []int {
	var e encoding
	b.encode(text, b.needOrig, &e)
	return e.ids
}

// EncodeOffsets is Encode with each id's byte span of text, as HF reports offsets
// (converted from characters to bytes): spans of normalised or byte-level text map back to
// the input characters they came from.
func (b *BPE) EncodeOffsets(text string) ([]int, [][2]int) {
	e := encoding{offsets: true}
	b.encode(text, true, &e)
	toks := e.tokens()
	if b.post != nil {
		toks = b.post.process(toks, false, text)
	}
	ids := make([]int, len(toks))
	offs := make([][2]int, len(toks))
	for i, t := range toks {
		ids[i], offs[i] = t.id, t.offset
	}
	return ids, offs
}

// EncodeSpecial tokenises text as HF's encode(text, add_special_tokens=True): the
// post-processor's template adds what the model expects around a sequence (e.g. BOS).
func (b *BPE) EncodeSpecial(text string) []int {
	ids := b.Encode(text)
	return b.PostProcess(ids)
}

// PostProcess adds the post-processor's special tokens around ids of one sequence.
func (b *BPE) PostProcess(ids []int) []int {
	if b.post == nil {
		return ids
	}
	toks := make([]encToken, len(ids))
	for i, id := range ids {
		toks[i] = encToken{id: id}
	}
	toks = b.post.process(toks, true, "")
	out := make([]int, len(toks))
	for i, t := range toks {
		out[i] = t.id
	}
	return out
}

// encoding collects the output of one encode.
type encoding struct {
	offsets bool
	ids     []int
	spans   [][2]int
	values  []string
}

func (e *encoding) add(id int, value string, span [2]int) {
	e.ids = append(e.ids, id)
	if e.offsets {
		e.spans = append(e.spans, span)
		e.values = append(e.values, value)
	}
}

func (e *encoding) tokens() []encToken {
	out := make([]encToken, len(e.ids))
	for i := range out {
		out[i] = encToken{id: e.ids[i], value: e.values[i], offset: e.spans[i]}
	}
	return out
}

// piece is one split of the text: either fixed (an added token) or still to tokenise.
type piece struct {
	ns    normString
	fixed int // id of the added token; -1 when not fixed
}

func (b *BPE) encode(text string, track bool, e *encoding) {
	if text == "" {
		return
	}
	whole := newNormString(text, 0, track)
	pieces := b.added.split(whole, false, nil)
	var pre []normString
	var toks []bpeToken
	for _, p := range pieces {
		if p.fixed >= 0 {
			e.add(p.fixed, p.ns.s, p.ns.span(0, len(p.ns.s)))
			continue
		}
		ns := p.ns
		if b.normalizer != nil {
			b.normalizer.normalize(&ns)
		}
		for _, q := range b.added.split(ns, true, nil) {
			if q.fixed >= 0 {
				e.add(q.fixed, q.ns.s, q.ns.span(0, len(q.ns.s)))
				continue
			}
			if q.ns.s == "" {
				continue
			}
			pre = pre[:0]
			if b.pre != nil {
				pre = b.pre.split(q.ns, pre)
			} else {
				pre = append(pre, q.ns)
			}
			for i := range pre {
				w := &pre[i]
				if w.s == "" {
					continue
				}
				toks = b.model.tokenize(w.s, toks[:0])
				for _, t := range toks {
					var value string
					if e.offsets {
						value = b.model.vocabR[t.id]
					}
					e.add(t.id, value, w.span(t.start, t.end))
				}
			}
		}
	}
}

// Decode renders ids as HF's decode(ids, skip_special_tokens=False): each id's token
// (added tokens in their normalised form) goes through the decoder chain; ids outside the
// vocabulary are skipped. Invalid UTF-8 that byte-level or byte-fallback pieces spell
// becomes U+FFFD, as in the reference.
func (b *BPE) Decode(ids []int) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || id >= len(b.tokens) || b.tokens[id] == "" {
			continue
		}
		toks = append(toks, b.tokens[id])
	}
	if b.decoder == nil {
		return strings.Join(toks, " ")
	}
	return strings.Join(b.decoder.decodeChain(toks), "")
}

var _ OffsetEncoder = (*BPE)(nil)

// ---- added tokens ----

type addedToken struct {
	text                       string // content as in tokenizer.json
	pattern                    string // what is matched: content, or its normalised form
	decoded                    string // what Decode starts from
	id                         int
	lstrip, rstrip, singleWord bool
	normalized, special        bool
}

// addedVocab matches added tokens leftmost-longest, raw ones in the input and normalized
// ones in each normalised piece (HF's two Aho-Corasick automata).
type addedVocab struct {
	tokens      []addedToken
	raw, normed *trie
}

func (v *addedVocab) build() {
	var raw, normed []int
	for i, t := range v.tokens {
		if t.normalized {
			normed = append(normed, i)
		} else {
			raw = append(raw, i)
		}
	}
	v.raw = newTrie(v.tokens, raw)
	v.normed = newTrie(v.tokens, normed)
}

// trie is a byte trie over token patterns; node 0 is the root.
type trie struct {
	nodes []trieNode
	first [256]bool // bytes a pattern can start with
}

type trieNode struct {
	edges []trieEdge // sorted by byte
	token int        // index into addedVocab.tokens; -1 when no pattern ends here
}

type trieEdge struct {
	b  byte
	to int32
}

func newTrie(tokens []addedToken, which []int) *trie {
	if len(which) == 0 {
		return nil
	}
	t := &trie{nodes: []trieNode{{token: -1}}}
	for _, i := range which {
		p := tokens[i].pattern
		if p == "" {
			continue
		}
		n := 0
		for k := 0; k < len(p); k++ {
			n = t.child(n, p[k], true)
		}
		if t.nodes[n].token < 0 {
			t.nodes[n].token = i
		}
		t.first[p[0]] = true
	}
	return t
}

func (t *trie) child(n int, c byte, create bool) int {
	es := t.nodes[n].edges
	k := sort.Search(len(es), func(i int) bool { return es[i].b >= c })
	if k < len(es) && es[k].b == c {
		return int(es[k].to)
	}
	if !create {
		return -1
	}
	t.nodes = append(t.nodes, trieNode{token: -1})
	id := len(t.nodes) - 1
	es = append(es, trieEdge{})
	copy(es[k+1:], es[k:])
	es[k] = trieEdge{b: c, to: int32(id)}
	t.nodes[n].edges = es
	return id
}

// longestAt returns the token index and end of the longest pattern starting at s[i:].
func (t *trie) longestAt(s string, i int) (int, int) {
	best, end := -1, 0
	n := 0
	for j := i; j < len(s); j++ {
		n = t.child(n, s[j], false)
		if n < 0 {
			break
		}
		if tok := t.nodes[n].token; tok >= 0 {
			best, end = tok, j+1
		}
	}
	return best, end
}

// split cuts ns around added-token matches as HF's AddedVocabulary::split_with_indices
// (find_matches: single_word, lstrip and rstrip widen or veto a match).
func (v *addedVocab) split(ns normString, normalized bool, out []piece) []piece {
	t := v.raw
	if normalized {
		t = v.normed
	}
	s := ns.s
	if t == nil || s == "" {
		if s == "" {
			return out
		}
		return append(out, piece{ns: ns, fixed: -1})
	}
	type cut struct {
		start, end int
		tok        int
	}
	var cuts []cut
	startOffset := 0
	for i := 0; i < len(s); {
		if !t.first[s[i]] {
			i++
			continue
		}
		tok, end := t.longestAt(s, i)
		if tok < 0 {
			i++
			continue
		}
		start, stop := i, end
		i = end // the automaton resumes after the raw match, vetoed or not
		a := &v.tokens[tok]
		if a.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if a.lstrip {
			start = max(trailingSpaceStart(s[:start]), startOffset)
		}
		if a.rstrip {
			stop += runOf(s[stop:], unicode.IsSpace)
		}
		if startOffset < start {
			cuts = append(cuts, cut{startOffset, start, -1})
		}
		cuts = append(cuts, cut{start, stop, tok})
		startOffset = stop
	}
	if len(cuts) == 0 {
		return append(out, piece{ns: ns, fixed: -1})
	}
	if startOffset != len(s) {
		cuts = append(cuts, cut{startOffset, len(s), -1})
	}
	for _, c := range cuts {
		sl := ns.slice(c.start, c.end)
		if sl.s == "" {
			continue
		}
		p := piece{ns: sl, fixed: -1}
		if c.tok >= 0 {
			p.fixed = v.tokens[c.tok].id
		}
		out = append(out, p)
	}
	return out
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}

// trailingSpaceStart is where the run of whitespace ending s begins.
func trailingSpaceStart(s string) int {
	i := len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= size
	}
	return i
}
