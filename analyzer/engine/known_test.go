package engine

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// TestKnownNumbersEveryKey checks that wkOf and wkKeys agree: a key numbered by one is named by
// the other, so an index built with wkOf answers for the key that lookups name.
func TestKnownNumbersEveryKey(t *testing.T) {
	for w := wk(0); w < nWK; w++ {
		k := wkKeys[w]
		if k == "" {
			t.Fatalf("attribute %d has no key", w)
		}
		if got, ok := wkOf(k); !ok || got != w {
			t.Errorf("wkOf(%q) = %d, %v; want %d", k, got, ok, w)
		}
	}
	if _, ok := wkOf("not.read"); ok {
		t.Error("wkOf numbered a key inference does not read")
	}
}

// TestKnownNumbersByAddressAsByText: a span's keys are numbered the same whether they are the
// well-known keys' own strings (numbered by address) or copies of them (numbered by text).
func TestKnownNumbersByAddressAsByText(t *testing.T) {
	keys := append(slices.Clone(spans.WellKnown), wkKeys[:]...)
	for _, key := range append(keys, "not.read") {
		want, wantOK := wkOf(key)
		for _, k := range []string{key, strings.Clone(key)} {
			if got, ok := wkOfKey(k); got != want || ok != wantOK {
				t.Errorf("wkOfKey(%q) = %d, %v; wkOf says %d, %v", k, got, ok, want, wantOK)
			}
		}
	}
}

// TestCarriedKeysInTheFrameworksOrder: the keys indexed for Trace.CarriesAttr are the
// framework's CarriedKeys, bit for bit: the engine sets bit w-wkCarried for key wkKeys[w], and
// CarriesAttr reads bit k for CarriedKeys[k].
func TestCarriedKeysInTheFrameworksOrder(t *testing.T) {
	if n := int(nWK - wkCarried); n != len(analyzer.CarriedKeys) {
		t.Fatalf("%d keys indexed for CarriesAttr, the framework names %d", n, len(analyzer.CarriedKeys))
	}
	for k, key := range analyzer.CarriedKeys {
		if got := wkKeys[wkCarried+wk(k)]; got != key {
			t.Errorf("bit %d: the engine indexes %q, the framework reads it as %q", k, got, key)
		}
	}
}

// TestKnownAnswersAsSpanLookups checks the index against the span's own lookups for spans with
// repeated keys (the first one wins), values of every type, keys inference does not read, and
// spans with more attributes than the index can number.
func TestKnownAnswersAsSpanLookups(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	values := []spans.Attr{spans.StringAttr("", "GET"), spans.StringAttr("", ""), spans.StringAttr("", "42"),
		spans.IntAttr("", 7), spans.IntAttr("", -1), spans.DoubleAttr("", 2), spans.DoubleAttr("", 2.5),
		spans.BoolAttr("", true), {Type: spans.ValueEmpty}}
	for _, n := range []int{0, 1, 3, 8, 30, 254, 255, 300} {
		for range 20 {
			s := &spans.Span{}
			for range n {
				a := values[rng.IntN(len(values))]
				if rng.IntN(4) == 0 {
					a.Key = "other.key"
				} else {
					a.Key = wkKeys[rng.IntN(int(nWK))]
				}
				s.Attrs = append(s.Attrs, a)
			}
			k := knownOf(s)
			for w := wk(0); w < nWK; w++ {
				key := wkKeys[w]
				wantA, wantOK := s.Attr(key)
				gotA, gotOK := k.attr(w)
				if gotA != wantA || gotOK != wantOK {
					t.Fatalf("%d attrs, %s: attr = %+v, %v; want %+v, %v", n, key, gotA, gotOK, wantA, wantOK)
				}
				if got, want := k.str(w), s.Str(key); got != want {
					t.Fatalf("%d attrs, %s: str = %q, want %q", n, key, got, want)
				}
				if got, want := k.intOr(w), intAttr(s, key); got != want {
					t.Fatalf("%d attrs, %s: intOr = %d, want %d", n, key, got, want)
				}
			}
		}
	}
}
