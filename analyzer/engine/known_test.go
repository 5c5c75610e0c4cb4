package engine

import (
	"fmt"
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
			s := spans.Span{Attrs: []spans.Attr{spans.StringAttr(k, "x")}}
			kn := knownOf(&s)
			for w := range wk(nWK) {
				if got := kn.has(w); got != (wantOK && w == want) {
					t.Errorf("a span with only %q (KeyIndex %d): has(%d) = %v; wkOf says %d, %v", k, spans.KeyIndex(k), w, got, want, wantOK)
				}
			}
		}
	}
}

// TestCarriedIndexNumbersTheDeclaredKeys: the keys indexed for Trace.CarriesAttr are the union
// of those the detectors declare, each with a bit of its own whether its string is a well-known
// key's own (numbered by address) or a copy (by text); an undeclared key has none, and keys past
// maxCarried are left to CarriesAttr's scan.
func TestCarriedIndexNumbersTheDeclaredKeys(t *testing.T) {
	if newCarriedIndex(nil) != nil || newCarriedIndex([]*analyzer.Detector{{Name: "none"}, nil}) != nil {
		t.Fatal("detectors that declare no key made an index")
	}
	var many []string
	for i := range maxCarried + 6 {
		many = append(many, fmt.Sprintf("custom.key.%03d", i))
	}
	ds := []*analyzer.Detector{
		{Name: "a", CarriedAttrs: []string{spans.AttrRetryAfter, spans.AttrDeadlineRemaining}},
		{Name: "b", CarriedAttrs: []string{spans.AttrRetryAfter, spans.AttrURLFull, "x.custom"}},
		{Name: "c", CarriedAttrs: many},
	}
	c := newCarriedIndex(ds)
	if len(c.keys) != maxCarried {
		t.Fatalf("%d keys indexed, want the first %d declared", len(c.keys), maxCarried)
	}
	bits := map[uint64]string{}
	for _, key := range c.keys {
		b := c.bit(spans.KeyIndex(key), key)
		if b == 0 || bits[b] != "" {
			t.Fatalf("key %q: bit %#x (already %q)", key, b, bits[b])
		}
		bits[b] = key
		if cl := strings.Clone(key); c.bit(spans.KeyIndex(cl), cl) != b {
			t.Errorf("key %q: a copy of its string has another bit", key)
		}
	}
	for _, key := range []string{spans.AttrRetryAfter, spans.AttrDeadlineRemaining, spans.AttrURLFull, "x.custom"} {
		if !slices.Contains(c.keys, key) {
			t.Errorf("declared key %q is not indexed", key)
		}
	}
	for _, key := range []string{spans.AttrIdempotencyKey, spans.AttrHTTPMethod, "not.declared", many[len(many)-1]} {
		if b := c.bit(spans.KeyIndex(key), key); b != 0 {
			t.Errorf("key %q is not indexed but has bit %#x", key, b)
		}
	}
	// A span's carried bits are those of its indexed keys, with or without the scan of a span
	// too wide for the attribute index.
	for _, n := range []int{3, 300} {
		s := &spans.Span{}
		for i := range n {
			s.Attrs = append(s.Attrs, spans.IntAttr(fmt.Sprintf("other.%d", i), 1))
		}
		s.Attrs[1].Key = spans.AttrRetryAfter
		s.Attrs[2].Key = strings.Clone("x.custom")
		var k known
		k.read(s, c)
		if want := c.bit(-1, spans.AttrRetryAfter) | c.bit(-1, "x.custom"); k.carried() != want {
			t.Errorf("%d attributes: carried %#x, want %#x", n, k.carried(), want)
		}
	}
}

// TestKnownAnswersAsSpanLookups checks the index (and which attributes it says a span has)
// against the span's own lookups for spans with repeated keys (the first one wins), values of
// every type, keys inference does not read, and spans with more attributes than the index can
// number.
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
				if k.has(w) != wantOK || k.hasAny(1<<w) != wantOK {
					t.Fatalf("%d attrs, %s: has = %v, want %v", n, key, k.has(w), wantOK)
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
