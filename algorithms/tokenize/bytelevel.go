package tokenize

import (
	"strings"
	"unicode/utf8"
)

// byteToRune is GPT-2's bytes_to_unicode table: printable Latin-1 bytes
// ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves, the other 68 bytes to
// U+0100.. in byte order, so every byte becomes a visible, non-space rune
// (space is 'Ġ' U+0120, newline 'Ċ' U+010A).
var byteToRune [256]rune

// runeToByte inverts byteToRune; -1 for runes outside the table.
var runeToByte [256 + 68]int16

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
	}
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	for b, r := range byteToRune {
		runeToByte[r] = int16(b)
	}
}

// byteLevelMap maps every byte of s (valid UTF-8 or not) to its GPT-2 rune.
func byteLevelMap(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteToRune[s[i]])
	}
	return sb.String()
}

// byteLevelUnmap inverts byteLevelMap; runes outside the table (which no
// byte-level vocabulary should contain) are kept as their UTF-8 bytes.
func byteLevelUnmap(dst []byte, s []byte) []byte {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if int(r) < len(runeToByte) && runeToByte[r] >= 0 { // invalid bytes decode as U+FFFD: kept raw
			dst = append(dst, byte(runeToByte[r]))
		} else {
			dst = append(dst, s[:n]...)
		}
		s = s[n:]
	}
	return dst
}
