package engine

import (
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

func TestSortByIDIsStableAndComplete(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 31, 32, 33, 100, 1000} {
		ss := make([]spans.Span, n)
		for i := range ss {
			ss[i].SpanID = spans.SpanID{byte(rng.IntN(8)), byte(rng.IntN(4))} // many duplicates
			ss[i].StartUnixNano = int64(i)                                    // arrival order
		}
		want := slices.Clone(ss)
		slices.SortStableFunc(want, func(a, b spans.Span) int {
			return slices.Compare(a.SpanID[:], b.SpanID[:])
		})
		var keys []idKey
		sortByID(ss, &keys)
		for i := range ss {
			if ss[i].SpanID != want[i].SpanID || ss[i].StartUnixNano != want[i].StartUnixNano {
				t.Fatalf("n=%d: position %d = %v/%d, want %v/%d", n, i, ss[i].SpanID, ss[i].StartUnixNano, want[i].SpanID, want[i].StartUnixNano)
			}
		}
	}
}

// TestLookupAndWalkMatchPlainSearches checks the index against the plainest answers: Lookup
// against a scan of the spans for ids present and absent (ids that differ in either half), Walk
// against a recursive walk of Children, with descendants skipped where fn says so.
func TestLookupAndWalkMatchPlainSearches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 2, 5, 40, 300} {
		ss := make([]spans.Span, n)
		for i := range ss {
			// Few distinct bytes: many ids share a half, and duplicates are dropped.
			ss[i].SpanID = spans.SpanID{byte(rng.IntN(3)), 0, 0, byte(rng.IntN(200)), byte(rng.IntN(3)), 0, 0, byte(rng.IntN(200))}
			ss[i].StartUnixNano = int64(rng.IntN(50))
			ss[i].EndUnixNano = ss[i].StartUnixNano + 10
			if i > 0 && rng.IntN(8) != 0 {
				ss[i].ParentID = ss[rng.IntN(i)].SpanID
			}
		}
		var tr trace
		sc := &scratch{}
		buildTrace(&tr, spans.TraceID{1}, ss, 0, sc)
		for range 500 {
			id := spans.SpanID{byte(rng.IntN(3)), 0, 0, byte(rng.IntN(200)), byte(rng.IntN(3)), 0, 0, byte(rng.IntN(200))}
			want := slices.IndexFunc(tr.Spans, func(s spans.Span) bool { return s.SpanID == id })
			got, ok := tr.Lookup(id)
			if ok != (want >= 0) || ok && got != want {
				t.Fatalf("n=%d: Lookup(%v) = %d, %v; want %d", n, id, got, ok, want)
			}
		}
		for i := range tr.Spans {
			skip := func(j int) bool { return (i*7+j*13)%5 == 0 }
			var want []int
			var rec func(j int)
			rec = func(j int) {
				for _, c := range tr.Children(j) {
					want = append(want, int(c))
					if !skip(int(c)) {
						rec(int(c))
					}
				}
			}
			rec(i)
			var got []int
			tr.Walk(i, func(j int) bool {
				got = append(got, j)
				return !skip(j)
			})
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d: Walk(%d) = %v, want %v", n, i, got, want)
			}
		}
	}
}

// TestDecodeHexAgreesWithEncodingHex: a finding's span ids are credited to their operations only
// when they decode, and decode to what encoding/hex reads in them - either case - for every byte
// that may stand at each place.
func TestDecodeHexAgreesWithEncodingHex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 1))
	const digits = "0123456789abcdefABCDEF"
	for n := range 20000 {
		b := make([]byte, 16)
		for i := range b {
			b[i] = digits[r.IntN(len(digits))]
		}
		if n%2 == 1 { // one byte of any value
			b[r.IntN(len(b))] = byte(n / 2 % 256)
		}
		s := string(b)
		want, err := hex.DecodeString(s)
		var got [8]byte
		if ok := decodeHex(got[:], s); ok != (err == nil) || ok && string(got[:]) != string(want) {
			t.Fatalf("decodeHex(%q) = %x, %v; encoding/hex: %x, %v", s, got, ok, want, err)
		}
	}
}
