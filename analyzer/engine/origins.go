package engine

import (
	"cmp"
	"slices"
)

// The addresses (origins) a dependency was called at, counted for the report with a bound, so that
// a callee on a port that changes per connection cannot grow a dependency's list without limit.

// maxOrigins bounds the addresses a dependency keeps count of: a callee on a port that changes
// per run, or behind thousands of pod IPs, is one dependency with that many origins, and the
// analyzer's memory must not grow with them.
const maxOrigins = 64

// listedOrigins is how many origins a report lists per dependency, most calls first.
const listedOrigins = 8

// addOrigin counts p physical calls (negative when a trace's analysis is withdrawn) to origin.
// Past maxOrigins distinct origins, the calls are counted as originsOver's.
func (g *depAgg) addOrigin(origin string, p int) {
	if origin == "" || p == 0 {
		return
	}
	if n, ok := g.origins[origin]; ok {
		if n+p <= 0 {
			delete(g.origins, origin)
			// What was over the bound is not moved back: it cannot say which origins it was.
			return
		}
		g.origins[origin] = n + p
		return
	}
	if p < 0 || len(g.origins) >= maxOrigins {
		g.originsOver = max(0, g.originsOver+p)
		return
	}
	if g.origins == nil {
		g.origins = map[string]int{}
	}
	g.origins[origin] = p
}

// listOrigins is the report's Origins (at most listedOrigins, most calls first, then by name)
// and MoreOrigins: the origins not listed, counting the calls past maxOrigins as one more.
func (g *depAgg) listOrigins() ([]string, int) {
	all := make([]string, 0, len(g.origins))
	for o := range g.origins {
		all = append(all, o)
	}
	slices.SortFunc(all, func(a, b string) int {
		return cmp.Or(cmp.Compare(g.origins[b], g.origins[a]), cmp.Compare(a, b))
	})
	more := 0
	if len(all) > listedOrigins {
		more = len(all) - listedOrigins
		all = all[:listedOrigins]
	}
	if g.originsOver > 0 {
		more++
	}
	if len(all) == 0 {
		all = nil
	}
	return all, more
}
