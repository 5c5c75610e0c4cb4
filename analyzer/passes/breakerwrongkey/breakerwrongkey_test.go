package breakerwrongkey_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

// Seed 003's first table replayed: a breaker keyed on the client refused 5 calls each to stock
// and pricing, which had answered 200 every time, because reviews failed. Exactly those two
// findings, with the seed's counts; reviews (which did fail) is not one of them.
func TestSeed003ClientKeyedBreaker(t *testing.T) {
	for _, shape := range []string{"stock", "reference"} {
		rep := passtest.Analyze(t, "breaker-wrong-key-"+shape, "", "")
		got := passtest.Of(rep, "breaker-wrong-key")
		var origins []string
		for _, f := range got {
			origins = append(origins, f.Dependency)
			ev := f.Evidence
			if ev["refused_calls"] != 5 {
				t.Errorf("%s %s: refused_calls %v, want 5", shape, f.Dependency, ev["refused_calls"])
			}
			if a := ev["answers"].(map[string]int); !maps.Equal(a, map[string]int{"200": 5}) {
				t.Errorf("%s %s: answers %v, want {200: 5}", shape, f.Dependency, a)
			}
			if fo := ev["failed_origins"].(map[string]int); !maps.Equal(fo, map[string]int{"http://reviews:8080": 5}) {
				t.Errorf("%s %s: failed_origins %v", shape, f.Dependency, fo)
			}
		}
		slices.Sort(origins)
		if !slices.Equal(origins, []string{"http://pricing:8080", "http://stock:8080"}) {
			t.Errorf("%s: findings for %v, want pricing and stock", shape, origins)
		}
		// Keyed per origin: stock {200: 10}, pricing {200: 10}, reviews {503: 5, refused: 5}.
		if got := passtest.Of(passtest.Analyze(t, "breaker-wrong-key-healthy-"+shape, "", ""), "breaker-wrong-key"); len(got) != 0 {
			t.Errorf("%s: per-origin breaker reported %v", shape, got)
		}
	}
}
