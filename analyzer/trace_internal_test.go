package analyzer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/spans"
)

func TestSortByIDIsStableAndComplete(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 7, 100, 1000} {
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
