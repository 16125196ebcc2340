// The hostile corpus the tokenizer goldens are computed on. Deterministic: hand-written strings
// plus strings drawn by a seeded generator from a hostile alphabet. Every string is valid
// UTF-16 without lone surrogates, so it round-trips through UTF-8 unchanged (the Rust
// tokenizers only ever see UTF-8).
'use strict'

function rng(seed) {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 4294967296
  }
}

const hand = [
  '',
  ' ',
  'a',
  'Hello world',
  'Hello, world! How are you?',
  // whitespace runs
  '  ', '   ', '    ', '\t', '\t\t', '\t x', 'x\t', ' \t \t', '\n', '\n\n', '\n\n\n', '\r\n', '\r\n\r\n',
  '\r', 'a\rb', 'a\r\nb', 'a\n\nb', 'a \n b', 'a  \n\n  b', 'x  \n\ny', 'line1\nline2\n', '\n\nleading',
  'trailing  ', 'trailing\n', ' leading', '  two leading', 'a  b', 'a   b', 'a    b', 'a\u00a0b', '\u00a0',
  'a\u00a0\u00a0b', 'a \u00a0b', '\u3000', '日本\u3000語', 'a\u2028b', 'a\u2029b', 'a\u0085b', 'a\u000bb', 'a\u000cb',
  'a\u2003b', 'a\u200ab', 'a\u202fb', 'a\u205fb', 'a\u1680b', ' \n \n ', '\t\n\t\n', 'word \t\n word',
  '    def f():\n        return 1\n',
  // CJK, Thai, Arabic, Hebrew, Indic, Korean, kana
  '你好，世界！', '我爱北京天安门。', '中文English混合', '日本語のテキストです。', 'ひらがなカタカナ漢字', 'ｶﾀｶﾅ半角',
  '한국어 텍스트입니다', '한국어', '\u1112\u1161\u11ab\u1100\u1173\u11af', 'สวัสดีครับ ยินดีต้อนรับ', 'ภาษาไทย',
  'مرحبا بالعالم', 'السلام عليكم ورحمة الله', 'שלום עולם', 'नमस्ते दुनिया', 'हिन्दी', 'বাংলা', 'தமிழ்',
  'Привет, мир!', 'Ελληνικά', 'Ἀθῆναι', 'ქართული', 'Հայերեն', 'ᠮᠣᠩᠭᠣᠯ', '𠀀𠀁𠀂', '丂丄丅丆', '〆〇〡〢',
  '鿥鿦龥', '\u4e00\u9fa5\u9fa6', 'ー', 'ゝゞヽヾ', 'カ゚', 'か\u3099',
  // emoji
  '😀', '😀😃😄', '👍🏽', '👍🏿 👋🏻', '👨‍👩‍👧‍👦', '👩🏽‍💻', '🏳️‍🌈', '🇺🇸🇯🇵🇫🇷', '#️⃣', '1️⃣2️⃣', '❤️', '❤',
  '☺︎', 'ok 👌 ok', 'emoji😀inside', '🧑‍🤝‍🧑', '🫠🫡', '\u{1F600}\u{1F3FB}', '🏴󠁧󠁢󠁳󠁣󠁴󠁿',
  // combining marks, NFC / NFKC sensitive
  'e\u0301', 'cafe\u0301', 'café', 'a\u0308\u0301', 'o\u0302\u0323', '\u0301', '\u0301a', 'n\u0303o',
  'Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐', 'ﬁ', 'ﬃ ligature', '①②③', 'Ⅻ', 'ⅻ', 'ｆｕｌｌｗｉｄｔｈ', 'ＡＢＣ１２３',
  '\u212b', '\u00c5', 'A\u030a', '\u2126', '\u03a9', '½ ¼ ¾', 'x² y³', 'H₂O', '™', '℃', '㎏', '㍻', 'ſ', 'ß', 'ẞ',
  'İstanbul', 'ı', 'Ǆ ǅ ǆ', 'ﷺ', '\u1e9b\u0323', 'ǰ', '\u0345', 'Å\u0328',
  // digits
  '1', '12', '123', '1234', '12345', '123456', '1234567', '12345678', '123456789', '1234567890',
  '12345678901', '123456789012', '1234567890123', '0', '00', '000', '0000', '00000', '3.14159',
  '1,234,567.89', '-42', '+7', '1e10', '0x1F', '2024-01-31', '12:34:56', 'v1.2.3', 'abc123def',
  'a1b2c3', '١٢٣٤٥', '۱۲۳', '१२३४', '１２３４５', '²³', 'Ⅷ', '⑩', '𝟙𝟚𝟛', '十二', '1st 2nd 3rd 4th',
  '999999999999999999999', 'x' + '9'.repeat(37),
  // contractions
  "I'm", "I'M", "i'm", "you'll", "YOU'LL", "You'Ll", "she's", "SHE'S", "it's", "IT'S", "we've", "WE'VE",
  "they're", "THEY'RE", "I'd", "I'D", "don't", "DON'T", "can't", "won't", "'s", "'S", "'t", "''s",
  "'ſ", "'K", "it’s", "rock 'n' roll", "the '90s", "O'Neill", "Mc'Donald's", "'ll'll'll", "x'", "'",
  "'re're", "he'sn't", "'ſt", "X'ſX", "don'ſt", "IT'ſ OK", "'ſ'S", "ʼs", "'ß",
  // added-token flags (the variants add HELLO, <flag>, word, is, ▁x)
  'word', 'a word.', 'words', 'sword', 'word_word', 'wordword', 'is this', 'This is it', 'HELLO world', 'hello',
  'Hello HELLO hElLo', ' <flag> x', 'x<flag>y', 'a  <flag>  b', '\t<flag>\n', '<flag><flag>', '▁x', 'x▁x', 'ab▁x',
  // code
  'def main():\n    print("hello")\n', 'function f(a, b) { return a + b; }', 'for (int i = 0; i < n; ++i) {}',
  'if x != None and y >= 2:\n\treturn x**2', '#include <stdio.h>\nint main(void) { return 0; }',
  '{"key": "value", "n": [1, 2, 3]}', '<div class="a">text</div>', 'SELECT * FROM users WHERE id = 42;',
  '$ ls -la /usr/bin | grep go', 'x := map[string]int{"a": 1}', '```python\nimport os\n```', '| a | b |\n|---|---|',
  'a_b_c', 'CamelCaseWord', 'camelCaseWord', 'SNAKE_CASE_CONST', 'kebab-case-word', '__init__', '...',
  '!!!', '???', '?!', '—', '–', '«quoted»', '“smart quotes”', '、。「」', '/', '//', 'a/b/c', '/path/to/file.txt',
  'C:\\Users\\name\\file.txt', '\\n', '\\x00', '@#$%^&*()', '~`|', '-->', '<=>', ':)', ';-)', '¯\\_(ツ)_/¯',
  // URLs and addresses
  'https://example.com/path?query=1&b=2#frag', 'http://localhost:8080/', 'www.example.org', 'user@example.com',
  'ftp://x.y/z', 'https://例え.jp/パス', 'mailto:a@b.c',
  // special-token strings in text
  '<|endoftext|>', 'hello<|endoftext|>world', '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n',
  ' <|im_end|> ', '<|im_start', '<<|im_end|>>', '<|im_end|><|im_end|>', '<think>\n\n</think>\n\n', '<tool_call>',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>', '<|eot_id|>\n\n', '<|eom_id|>',
  '<|reserved_special_token_5|>', '<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n',
  '<bos>', '<eos>', '<pad>', '<unk>', '<mask>', '<start_of_image>', '<unused0>', '[@BOS@]',
  '<｜begin▁of▁sentence｜>Hi<｜end▁of▁sentence｜>', '<｜User｜>hi<｜Assistant｜>', '<｜tool▁call▁begin｜>',
  '<|endofprompt|>', '<|start|>assistant<|channel|>final<|message|>hi<|return|>', '<s>', '</s>', '<s> </s>',
  'a<s>b', 'text </s>', '<|fim_prefix|>x<|fim_suffix|>y<|fim_middle|>', '<|vision_start|>',
  // invalid-looking sequences
  '\ufffd', '\ufffd\ufffd', '\\xff', '<0xFF>', '<0x41>', '<0x0A>', 'Ã©', 'Ã¤Ã¶Ã¼', 'Ä ', 'Ġhello', 'Ċ', '▁', '▁▁',
  'a▁b', '▁hello', '\u0000', 'a\u0000b', '\u0001\u001f\u007f', '\u200b', 'a\u200bb', '\ufeff', '\ufeffBOM',
  '\u200f\u200e', '\u202e', '\u2066x\u2069', '\ue000', '\uf8ff', '\uffff', '\ufffe', '\u{10FFFF}', '\u{E0001}',
  '\u00ad', 'soft\u00adhyphen', '\u034f', '\u180e', '\u2060', '\u{1D400}\u{1D401}', '\u{10000}',
  // very long
  'a'.repeat(1000), 'supercalifragilisticexpialidocious'.repeat(40), '7'.repeat(500), ' '.repeat(1000),
  '\n'.repeat(300), '😀'.repeat(200), '中'.repeat(600), 'ab '.repeat(400), 'x\t'.repeat(300),
  'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(20),
  // mixed case (o200k's letter classes)
  'HelloWorld', 'iPhone', 'ABCdef', 'abcDEF', 'HTTPServer', 'XMLHttpRequest', 'ΑΒΓαβγ', 'ǅungla', 'ʰʲʷ', 'ˈstres',
  'Ǳ', 'ᾈ', 'ABC', 'abc', 'AbC', 'aBc', 'I', 'A.B.C.', 'U.S.A.', 'MÜNCHEN', 'münchen', 'ÉCOLE',
  'ŉ', 'ΐ', 'ﬀ', 'Ꭰ', 'ꭰ', 'ⓐⓑ', 'Ⓐ', '𝐀𝐁𝐂', '𝔄𝔅', 'ａｂｃ',
]

// A hostile alphabet for random strings: pieces that stress splitting, merging and
// normalisation at their boundaries.
const pieces = [
  ' ', ' ', '  ', '\t', '\n', '\r\n', '\u00a0', '\u3000', 'a', 'e', 'Z', 'the', 'The', 'THE', 'ing', "'s", "'LL",
  '1', '23', '456', '7890', '.', ',', '!', '?', '/', '-', '_', '(', ')', '"', "'", '<', '>', '|', '#',
  'é', 'e\u0301', 'ü', 'ß', 'ﬁ', '①', 'Å', '中', '文', '日本', 'カ', 'ひ', '한', 'ไทย', 'عرب', 'ש', 'हि',
  '😀', '👍🏽', '👨‍👩‍👧', '🇯🇵', '❤️', '\u200b', '\u200d', '\ufeff', '\u0301', '▁', 'Ġ', '\ufffd',
  '<|endoftext|>', '<|im_start|>', '<|eot_id|>', '<bos>', '<eos>', '<start_of_turn>', '<｜end▁of▁sentence｜>', '<s>',
  '</s>', '<unk>', 'http://x.io', 'λ', 'Ω', '²', '١', '１', 'Ⅻ', '𝟙', 'ǅ', 'ʰ',
]

function random(n, seed) {
  const r = rng(seed)
  const out = []
  for (let i = 0; i < n; i++) {
    const len = 1 + Math.floor(r() * (i % 5 === 4 ? 60 : 14))
    let s = ''
    for (let k = 0; k < len; k++) s += pieces[Math.floor(r() * pieces.length)]
    out.push(s)
  }
  return out
}

// Every whitespace character HF's \s knows, in runs of 1..4, between words.
function whitespaceGrid() {
  const ws = [' ', '\t', '\n', '\r', '\u000b', '\u000c', '\u0085', '\u00a0', '\u2000', '\u3000']
  const out = []
  for (const w of ws) for (const n of [1, 2, 3]) out.push('x' + w.repeat(n) + 'y', w.repeat(n) + 'z', 'z' + w.repeat(n))
  return out
}

function digitGrid() {
  const out = []
  for (let n = 1; n <= 16; n++) out.push('a' + '1234567890123456'.slice(0, n) + 'b', ' ' + '9'.repeat(n))
  return out
}

function corpus() {
  const all = [...hand, ...whitespaceGrid(), ...digitGrid(), ...random(120, 20260315)]
  const seen = new Set()
  return all.filter((s) => (seen.has(s) ? false : (seen.add(s), true)))
}

module.exports = { corpus, rng }
