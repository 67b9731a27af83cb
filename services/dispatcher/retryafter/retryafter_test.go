package retryafter

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	limit := 24 * time.Hour
	tests := []struct {
		name   string
		give   string
		want   time.Duration
		wantOK bool
	}{
		{"delta seconds", "120", 120 * time.Second, true},
		{"zero", "0", 0, true},
		{"padded", "  30 ", 30 * time.Second, true},
		{"IMF-fixdate", "Sun, 30 Nov 2026 12:02:00 GMT", 2 * time.Minute, true},
		{"RFC 850", "Sunday, 30-Nov-26 12:02:00 GMT", 2 * time.Minute, true},
		{"asctime", "Sun Nov 30 12:02:00 2026", 2 * time.Minute, true},
		{"date in the past", "Sun, 30 Nov 2026 11:00:00 GMT", 0, true},
		{"capped seconds", "999999", limit, true},
		{"absurd seconds", "99999999999999999999999", limit, true},
		{"capped date", "Fri, 01 Jan 2100 00:00:00 GMT", limit, true},
		{"negative", "-5", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"empty", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Parse(tt.give, now, limit)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("Parse(%q) = %v, %v; want %v, %v", tt.give, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "Sun, 30 Nov 2026 12:02:00 GMT", "Sunday, 30-Nov-26 12:02:00 GMT", "Sun Nov 30 12:02:00 2026", "x", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const limit = 24 * time.Hour
	f.Fuzz(func(t *testing.T, header string) {
		d, ok := Parse(header, now, limit)
		if d < 0 || d > limit {
			t.Fatalf("Parse(%q) = %v outside [0, %v]", header, d, limit)
		}
		if !ok && d != 0 {
			t.Fatalf("Parse(%q) = %v with ok=false", header, d)
		}
	})
}
