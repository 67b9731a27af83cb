package dispatcher

import (
	"slices"
	"testing"
)

func TestCommittedAboveOffsetsRoundTripThroughTheMetadata(t *testing.T) {
	tests := []struct {
		name string
		base int64
		give []int64
	}{
		{"none", 10, nil},
		{"one", 10, []int64{11}},
		{"a run", 0, []int64{1, 2, 3, 4}},
		{"runs and gaps", 100, []int64{101, 102, 150, 151, 152, 4000, 1 << 40}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			meta, held := encodeAbove(tt.base, tt.give, aboveMetaMax)
			if held != len(tt.give) {
				t.Fatalf("held %d of %d", held, len(tt.give))
			}
			got, ok := decodeAbove(tt.base, meta)
			if !ok || !slices.Equal(got, tt.give) {
				t.Fatalf("decode(%q) = %v, %v; want %v", meta, got, ok, tt.give)
			}
		})
	}
}

func TestMetadataHoldsAPrefixWithinItsBudget(t *testing.T) {
	var offs []int64
	for i := int64(1); i <= 2000; i++ {
		offs = append(offs, 2*i) // every other offset: one run each
	}
	meta, held := encodeAbove(0, offs, 200)
	if len(meta) > 200 || held == 0 || held == len(offs) {
		t.Fatalf("%d bytes holding %d of %d", len(meta), held, len(offs))
	}
	got, ok := decodeAbove(0, meta)
	if !ok || !slices.Equal(got, offs[:held]) {
		t.Fatalf("decoded %d offsets, want the first %d", len(got), held)
	}
}

func TestMetadataNotWrittenHereSkipsNothing(t *testing.T) {
	for _, meta := range []string{"something else", "hl1:", "hl1:!.1", "hl1:0.1", "hl1:1.0", "hl1:1", "hl1:-1.2", "hl1:1.2,,"} {
		if got, ok := decodeAbove(5, meta); ok || got != nil {
			t.Errorf("decode(%q) = %v, %v; want nothing, false", meta, got, ok)
		}
	}
	if got, ok := decodeAbove(5, ""); !ok || got != nil {
		t.Errorf(`decode("") = %v, %v; want nothing, true`, got, ok)
	}
}

// FuzzDecodeAboveNeverNamesTheWatermarkOrBelow: whatever the metadata,
// what it names is strictly above the committed offset and ascending, so
// a skip never passes a delivery the watermark has not reached.
func FuzzDecodeAboveNeverNamesTheWatermarkOrBelow(f *testing.F) {
	f.Add(int64(7), "hl1:1.3,2.1")
	f.Add(int64(0), "hl1:zz.1")
	f.Fuzz(func(t *testing.T, base int64, meta string) {
		if base < 0 || base > 1<<50 {
			return
		}
		got, ok := decodeAbove(base, meta)
		if !ok {
			return
		}
		for i, o := range got {
			if o <= base || i > 0 && o <= got[i-1] {
				t.Fatalf("decode(%d, %q) names %v", base, meta, got)
			}
		}
	})
}
