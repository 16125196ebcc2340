// Package tokenize turns text into token ids and back, with no I/O of its own:
// every loader takes an io.Reader.
//
// Implementations of Tokenizer:
//   - Byte: 256 byte ids plus PAD/BOS/EOS; the default for built-in tasks.
//     Decode(Encode(s)) == s for every string, valid UTF-8 or not.
//   - BPE (LoadHF): a Hugging Face tokenizer.json with a BPE model, byte-level
//     (GPT-2, Llama 3, Qwen, DeepSeek, o200k) or SentencePiece-style (Gemma,
//     Llama 2). The pipeline is a port of HF's Rust tokenizers, step by step:
//     added tokens, normalizer, pre-tokenizer (regexes run by an
//     Oniguruma-compatible matcher, with hand-written scanners for the GPT-2,
//     Llama-3 and Qwen2 patterns), BPE merges, post-processor; decoders for
//     Decode. Ids, offsets and decodes are checked against the reference on
//     real files (testdata/hf, made by scripts/goldens/tokenizers).
//     EncodeSpecial adds what the post-processor's template adds (HF's
//     add_special_tokens=True); LoadHFConfig reads tokenizer_config.json and
//     WithConfig applies its specials. docs/tokenizers.md lists what is
//     supported and refused.
//   - SentencePiece (LoadSentencePiece): a SentencePiece BPE tokenizer.model
//     (Gemma), via github.com/eliben/go-sentencepiece.
//
// Byte, BPE and SentencePiece are OffsetEncoders: EncodeOffsets gives each
// id's byte span of the input with Hugging Face's conventions.
//
// Contract: Encode never adds BOS/EOS (callers and ChatTemplate do);
// Decode skips ids outside the vocabulary instead of failing (BPE.Decode is
// HF's decode: invalid UTF-8 becomes U+FFFD); loaders
// return errors (prefixed "tokenize:") for anything they cannot reproduce
// faithfully rather than tokenising differently from the reference; nothing
// panics. Tokenizers are safe for concurrent use once loaded.
//
// ChatTemplate renders []Message into ids plus a per-token mask that is true
// exactly on assistant completion tokens (for SFT loss masking).
package tokenize
