package apikey

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"

	"github.com/trustelem/zxcvbn/match"
	"github.com/trustelem/zxcvbn/matching"
	"github.com/trustelem/zxcvbn/scoring"
)

// MinBits is the randomness, in bits, that a key accepted outside
// development mode must be able to hold.
const MinBits = 128

// PatternSlack is how far below MinBits the pattern estimate of a key may
// fall: random keys contain chance "words" and "dates" (a 128-bit hex
// key scores 95 to 128), keys made of words score far less.
const PatternSlack = 48

// wordPrefix matches the readable labels keys often start with ("hk_",
// "hk_dev_", "key-"): they add no randomness, so they are not counted.
var wordPrefix = regexp.MustCompile(`^(?:[A-Za-z]{1,12}[_-])+`)

// minPattern is the shortest word or pattern zxcvbn finds inside a run
// of characters that the pattern estimate believes: shorter ones turn up
// by chance in random keys ("7e4d", "741"). A word standing between
// separators counts at any length.
const minPattern = 5

// separators split words in keys people make up.
const separators = "-_.:/+ "

// Strength is the estimated randomness of a key, in bits.
type Strength struct {
	// Capacity is what the key can hold: its length, without a leading
	// label, times log2 of the alphabet of the encoding it is written in
	// (decimal 10, hex 16, base64 and base64url 64, else printable ASCII
	// 95). For a key drawn at random it is the key's randomness.
	Capacity float64
	// Pattern is the cheapest account of the key as zxcvbn sees it:
	// each character a draw from that alphabet, or part of a word,
	// keyboard walk, sequence, repeat or date at log2 of the guesses it
	// takes; capped by the key's DEFLATE-compressed size.
	Pattern float64
}

// Measure estimates key's randomness. It remembers results by the key's
// hash (an estimate takes milliseconds) and is safe for concurrent use.
// It refuses short keys and keys made of words and patterns; it cannot
// prove a key random. Keys from "hookline apikey new" hold 256 bits.
func Measure(key string) Strength {
	h := sha256.Sum256([]byte(key))
	if v, ok := measured.Load(h); ok {
		return v.(Strength)
	}
	v := measure(key)
	measured.Store(h, v)
	return v
}

// measured remembers Measure by the key's SHA-256, so a keys file read
// again does not measure its unchanged keys again. It holds one entry per
// key ever configured.
var measured sync.Map

// tooWeak says why key is refused when minBits > 0, or returns nil.
func tooWeak(key string, minBits int) error {
	if minBits <= 0 {
		return nil
	}
	s := Measure(key)
	switch {
	case s.Capacity < float64(minBits):
		return fmt.Errorf("the key can hold about %.0f bits of randomness, fewer than %d; make one with \"hookline apikey new\"", s.Capacity, minBits)
	case s.Pattern < float64(minBits-PatternSlack):
		return fmt.Errorf("the key is made of words or patterns (about %.0f bits by their guesses); make one with \"hookline apikey new\"", s.Pattern)
	}
	return nil
}

func measure(key string) Strength {
	body := key
	if rest := wordPrefix.ReplaceAllString(key, ""); len(rest) >= 16 {
		body = rest
	}
	perChar := math.Log2(float64(alphabet(body)))
	s := Strength{Capacity: float64(len(body)) * perChar}
	// bits[k] is the cheapest account of body[:k].
	ending := map[int][]*match.Match{}
	for _, m := range matching.Omnimatch(body, nil) {
		if m.J < len(body) && body[m.I:m.J+1] == m.Token && (m.J+1-m.I >= minPattern || m.Pattern == "dictionary" && standsAlone(body, m.I, m.J+1)) {
			ending[m.J+1] = append(ending[m.J+1], m)
		}
	}
	bits := make([]float64, len(body)+1)
	for k := 1; k <= len(body); k++ {
		bits[k] = bits[k-1] + perChar
		if strings.IndexByte(separators, body[k-1]) >= 0 {
			// Between words a separator is one of a few: log2 of 8.
			bits[k] = min(bits[k], bits[k-1]+3)
		}
		for _, m := range ending[k] {
			bits[k] = min(bits[k], bits[m.I]+math.Log2(max(scoring.EstimateGuesses(m, body), 1)))
		}
	}
	s.Pattern = min(bits[len(body)], compressedBits(body))
	return s
}

// standsAlone reports whether s[i:j] is bounded by separators or the
// ends of s.
func standsAlone(s string, i, j int) bool {
	return (i == 0 || strings.IndexByte(separators, s[i-1]) >= 0) && (j == len(s) || strings.IndexByte(separators, s[j]) >= 0)
}

// alphabet returns the size of the alphabet of the encoding s is
// written in: decimal, hex, base64 or base64url, else printable ASCII.
func alphabet(s string) int {
	in := func(set string) bool {
		return strings.Trim(s, set) == ""
	}
	switch {
	case in("0123456789"):
		return 10
	case in("0123456789abcdef"), in("0123456789ABCDEF"):
		return 16
	case in("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
		in("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="):
		return 64
	}
	return 95
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
