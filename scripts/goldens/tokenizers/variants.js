// Variants of the real tokenizer files that exercise the components no shipped file of the
// target families uses (Metaspace, Digits, Punctuation, Whitespace, other split behaviours,
// NFD/NFKC/NFKD, Lowercase, Strip, ByteLevel offset trimming, TemplateProcessing around a
// sequence, Strip and Metaspace decoders, added-token flags). Each replaces top-level
// components of a base file, may override model fields, and may append added tokens (their
// ids are assigned by gen.js as Hugging Face assigns them).
'use strict'

const byteLevel = (addPrefixSpace, trimOffsets, useRegex) => ({
  type: 'ByteLevel',
  add_prefix_space: addPrefixSpace,
  trim_offsets: trimOffsets,
  use_regex: useRegex,
})

const added = (content, flags) => ({
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: false,
  ...flags,
})

module.exports = {
  qwen3_nfkc_lower: {
    base: 'qwen3',
    set: {
      normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'Lowercase' }] },
    },
    added: [
      added('HELLO', { normalized: true }),
      added('<flag>', { lstrip: true, rstrip: true, special: true }),
      added('word', { single_word: true, normalized: true }),
      added('is', { single_word: true }),
    ],
  },
  qwen3_nfd_strip_digits: {
    base: 'qwen3',
    set: {
      normalizer: {
        type: 'Sequence',
        normalizers: [
          { type: 'NFD' },
          { type: 'Strip', strip_left: true, strip_right: true },
          { type: 'Replace', pattern: { Regex: '\\s{2,}' }, content: ' ' },
        ],
      },
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Digits', individual_digits: true },
          { type: 'Punctuation', behavior: 'Contiguous' },
          { type: 'Split', pattern: { String: ' ' }, behavior: 'MergedWithNext', invert: false },
          byteLevel(true, true, false),
        ],
      },
      post_processor: byteLevel(true, true, true),
    },
  },
  qwen3_whitespace_template: {
    base: 'qwen3',
    set: {
      normalizer: { type: 'Sequence', normalizers: [{ type: 'NFKD' }, { type: 'Prepend', prepend: '~' }] },
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Whitespace' },
          { type: 'Digits', individual_digits: false },
          { type: 'Split', pattern: { Regex: '\\p{P}+' }, behavior: 'MergedWithPrevious', invert: false },
          byteLevel(false, false, true),
        ],
      },
      post_processor: {
        type: 'Sequence',
        processors: [
          byteLevel(false, true, true),
          {
            type: 'TemplateProcessing',
            single: [
              { SpecialToken: { id: '<|im_start|>', type_id: 0 } },
              { Sequence: { id: 'A', type_id: 0 } },
              { SpecialToken: { id: '<|im_end|>', type_id: 0 } },
            ],
            pair: [
              { Sequence: { id: 'A', type_id: 0 } },
              { Sequence: { id: 'B', type_id: 1 } },
            ],
            special_tokens: {
              '<|im_start|>': { id: '<|im_start|>', ids: [151644], tokens: ['<|im_start|>'] },
              '<|im_end|>': { id: '<|im_end|>', ids: [151645], tokens: ['<|im_end|>'] },
            },
          },
        ],
      },
    },
  },
  qwen3_wssplit_contiguous: {
    base: 'qwen3',
    set: {
      normalizer: null,
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'WhitespaceSplit' },
          { type: 'Split', pattern: { Regex: '[aeiou]+' }, behavior: 'Contiguous', invert: false },
          { type: 'CharDelimiterSplit', delimiter: 'x' },
          { type: 'Split', pattern: { Regex: '\\d' }, behavior: 'MergedWithNext', invert: true },
          byteLevel(true, true, false),
        ],
      },
      decoder: { type: 'Sequence', decoders: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true }, { type: 'Strip', content: ' ', start: 1, stop: 1 }] },
    },
  },
  llama2_metaspace_first: {
    base: 'llama2',
    set: {
      normalizer: null,
      pre_tokenizer: { type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true },
      decoder: {
        type: 'Sequence',
        decoders: [{ type: 'Metaspace', replacement: '▁', prepend_scheme: 'first', split: true }, { type: 'ByteFallback' }, { type: 'Fuse' }],
      },
    },
    added: [added('<flag>', { lstrip: true, special: true }), added('▁x', { normalized: true })],
  },
  llama2_metaspace_always_unk: {
    base: 'llama2',
    set: {
      normalizer: { type: 'Sequence', normalizers: [{ type: 'Lowercase' }] },
      pre_tokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Split', pattern: { String: '\n' }, behavior: 'Isolated', invert: false },
          { type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: false },
        ],
      },
      decoder: {
        type: 'Sequence',
        decoders: [{ type: 'ByteFallback' }, { type: 'Metaspace', replacement: '▁', prepend_scheme: 'never', split: false }, { type: 'Fuse' }],
      },
    },
    model: { byte_fallback: false, fuse_unk: false },
  },
}
