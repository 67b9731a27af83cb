package apikey

import (
	"bytes"
	"compress/flate"
	"math"
	"regexp"
	"strings"
)

// MinBits is the least estimated randomness, in bits, of a key that
// ingest accepts outside development mode.
const MinBits = 128

// wordPrefix matches the readable labels keys often start with ("hk_",
// "hk_dev_", "key-"): they add no randomness, so Bits does not count them.
var wordPrefix = regexp.MustCompile(`^(?:[A-Za-z]{1,12}[_-])+`)

// Bits estimates how many bits of randomness key holds: its length,
// without a leading label, times log2 of the smallest alphabet holding
// all its characters (hex 16; else digits, lower case, upper case and
// other printable characters added by class), and no more than its
// DEFLATE-compressed size, so a repeated pattern counts for little. This
// is an upper bound for keys that were drawn at random and a generous
// one for keys that were not (a passphrase scores as if random): it
// refuses short and patterned keys, it cannot prove a key random. Keys
// from "hookline apikey new" hold 256 bits.
func Bits(key string) float64 {
	body := key
	if rest := wordPrefix.ReplaceAllString(key, ""); len(rest) >= 16 {
		body = rest
	}
	if body == "" {
		return 0
	}
	var digit, lower, upper, other, hexOnly = false, false, false, false, true
	for _, r := range body {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'z':
			lower = true
			hexOnly = hexOnly && r <= 'f'
		case r >= 'A' && r <= 'Z':
			upper = true
			hexOnly = hexOnly && r <= 'F'
		default:
			other = true
			hexOnly = false
		}
	}
	alphabet := 16 // hex digits, in one case
	if !hexOnly || (lower && upper) {
		alphabet = 0
		for _, c := range []struct {
			has  bool
			size int
		}{{digit, 10}, {lower, 26}, {upper, 26}, {other, 33}} {
			if c.has {
				alphabet += c.size
			}
		}
	}
	bits := float64(len([]rune(body))) * math.Log2(float64(alphabet))
	return min(bits, compressedBits(body))
}

// compressedBits is the size of s compressed with DEFLATE, in bits: a
// repeated pattern compresses to little whatever its length or alphabet.
func compressedBits(s string) float64 {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression) // only fails for a bad level
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return float64(8 * b.Len())
}

// weak reports whether key holds fewer than minBits bits by Bits.
func weak(key string, minBits int) bool {
	return minBits > 0 && Bits(strings.TrimSpace(key)) < float64(minBits)
}
