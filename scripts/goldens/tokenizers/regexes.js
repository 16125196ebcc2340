// Patterns and texts on which the Oniguruma engine of the Rust tokenizers is asked for its
// matches (through a Split pre-tokenizer with behavior Removed and invert: each piece is one
// non-empty match), to check the Go engine against it.
'use strict'

const texts = [
  "kK\u212a", "'s'S'\u017f's", "'\u017ft X'\u017fX", "sS\u017f", "\u1e9e\u00df", "\u03c2\u03a3\u03c3", "ABCd aAb",
  "I\u0130\u0131i", "a\u200db c\u00b7d e_f1 g\u0301h", "0xBEEFg", "\u0661\uff11 12 \u2168", "a\u00a0\u3000\u2028\u0085\u000bb",
  "line1\nline2\n", "aaa bbb", "  x  \n\n y ", "HTTPServer \u01c5x i\u0307", "x.Net a-b [x", "\u4e2d\u6587abc\u3042\u30a2",
  "12345678", "it's I'LL we'VE", "a1b2 c3", "\ud83d\ude00\u200d\ud83d\ude00", "e\u0301\u0301", "tab\tsep", "\r\n\r\n",
]

const patterns = [
  "(?i)k", "(?i:'s|'t|'re|'ve|'m|'ll|'d)", "(?i)\u017f", "(?i)\u00df", "(?i)\u03c3", "(?i:[a-c])", "(?i:[^a])", "(?i)i",
  "\\w+", "\\W+", "\\h+", "\\d+", "\\D+", "\\s+", "\\S+", "^\\w+", "\\w+$", "\\Aa|a\\z", ".+", "\\bx|\\w\\b",
  "a+?", "\\s+(?!\\S)|\\s+", "(?=\\w)\\p{Lu}", "\\p{N}{1,3}", "\\p{N}{1,3}+", "\\p{L}++\\p{N}", "(?>\\p{L}+)\\d",
  "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+", "[^\\s\\p{L}\\p{N}]+", "\\P{L}+", "\\p{^N}+",
  "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", "\\p{Han}+|\\p{Hiragana}+", "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+",
  "x{2}|y{,2}", "(a|ab)(c|bcd)", "\\x41|\\u0042|\\x{43}", "[\\s\\d]+", "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "\\s*[\\r\\n]+",
  "\\p{M}+", "\\p{Lu}\\p{Ll}+", "(?i)[k\u00df]+", "\\p{Zs}", "\\p{Cf}", "\\p{P}+", "\\p{S}+",
]

module.exports = { texts, patterns }
