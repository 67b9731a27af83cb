// Package ids makes Hookline's identifiers: a short type prefix, then 26
// characters of lowercase Crockford base32 over a 48-bit millisecond
// timestamp and 80 random bits, so ids sort by creation time.
package ids

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"strings"
	"time"
)

// Prefixes of each kind of id.
const (
	Event    = "evt_"
	Delivery = "dlv_"
	Endpoint = "ep_"
	Notice   = "ntc_"
	// LaneCommand is a command on an ordered lane (an operator's, or
	// the scheduler's release of a member it set aside).
	LaneCommand = "lcm_"
)

const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// New returns prefix followed by a time-ordered random id for time now.
// It is safe for concurrent use.
func New(prefix string, now time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+).
	return encode(prefix, b)
}

// Derive returns prefix followed by an id for time t whose other 80 bits
// are the first of SHA-256 over parts (each length-prefixed): the same
// parts and time give the same id in every process, so an id derived
// from ids that are themselves unique (an event id and an endpoint id)
// need not be stored to be answered again. Distinct parts collide no
// more often than New's random ids do. It is safe for concurrent use.
func Derive(prefix string, t time.Time, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		_ = binary.Write(h, binary.BigEndian, uint64(len(p)))
		h.Write([]byte(p))
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(max(t.UnixMilli(), 0))<<16)
	copy(b[6:], h.Sum(nil))
	return encode(prefix, b)
}

// Floor returns the smallest id of prefix made at time t or later: every
// id New makes at t or after sorts at or above it, every id made before
// t below it. It is a bound for ranges of ids by time, not an id.
func Floor(prefix string, t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(max(t.UnixMilli(), 0))<<16)
	return encode(prefix, b)
}

// Time returns the millisecond an id of prefix was made at, and false
// if id is not such an id.
func Time(prefix, id string) (time.Time, bool) {
	if !Valid(prefix, id) {
		return time.Time{}, false
	}
	// The first 10 digits carry 3+45 bits: the 48-bit timestamp.
	var ms uint64
	for i := range 10 {
		ms = ms<<5 | uint64(strings.IndexByte(alphabet, id[len(prefix)+i]))
	}
	return time.UnixMilli(int64(ms)), true
}

func encode(prefix string, b [16]byte) string {
	var sb strings.Builder
	sb.Grow(len(prefix) + 26)
	sb.WriteString(prefix)
	// 128 bits in 26 base32 digits; the first digit carries 3 bits.
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = alphabet[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	sb.Write(out[:])
	return sb.String()
}

// Valid reports whether s looks like an id of the given prefix.
func Valid(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != 26 {
		return false
	}
	for i := range len(rest) {
		if strings.IndexByte(alphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}
