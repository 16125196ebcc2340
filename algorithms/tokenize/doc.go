// Package tokenize turns text into token ids and back, with no I/O of its own:
// every loader takes an io.Reader.
//
// Implementations of Tokenizer:
//   - Byte: 256 byte ids plus PAD/BOS/EOS; the default for built-in tasks.
//     Decode(Encode(s)) == s for every string, valid UTF-8 or not.
//   - BPE (LoadHF): a Hugging Face tokenizer.json with a byte-level BPE model
//     (GPT-2, Llama-3, Qwen2 style). Added tokens are matched in the raw text
//     first; the rest is NFC-normalised when the file asks for it, split by a
//     hand-written scanner for the GPT-2, Llama-3 or Qwen2 pattern, mapped
//     through the GPT-2 byte-to-unicode table and merged by rank.
//   - SentencePiece (LoadSentencePiece): a SentencePiece BPE tokenizer.model
//     (Gemma), via github.com/eliben/go-sentencepiece.
//
// Contract: Encode never adds BOS/EOS (callers and ChatTemplate do);
// Decode skips ids outside the vocabulary instead of failing; loaders
// return errors (prefixed "tokenize:") for anything they cannot reproduce
// faithfully rather than tokenising differently from the reference; nothing
// panics. Tokenizers are safe for concurrent use once loaded.
//
// ChatTemplate renders []Message into ids plus a per-token mask that is true
// exactly on assistant completion tokens (for SFT loss masking).
package tokenize
