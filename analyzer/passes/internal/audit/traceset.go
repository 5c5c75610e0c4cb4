package audit

import (
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// smallSet is how many trace ids a TraceSet keeps in a slice before it moves them to a map.
const smallSet = 16

// TraceSet is a set of trace ids for the windowed detectors, which count the distinct traces
// (independent requests) behind a group of operations, mostly only up to a threshold: a few ids
// live in a slice, searched linearly, and only a set that outgrows it pays for a map. The zero
// value is an empty set.
type TraceSet struct {
	small []spans.TraceID
	large map[spans.TraceID]struct{}
}

// Add puts id in the set.
func (s *TraceSet) Add(id spans.TraceID) {
	if s.large != nil {
		s.large[id] = struct{}{}
		return
	}
	// Operations come trace by trace: the id just added is the likeliest repeat.
	if n := len(s.small); n > 0 && s.small[n-1] == id || slices.Contains(s.small, id) {
		return
	}
	if len(s.small) < smallSet {
		s.small = append(s.small, id)
		return
	}
	s.large = make(map[spans.TraceID]struct{}, 2*smallSet)
	for _, x := range s.small {
		s.large[x] = struct{}{}
	}
	s.large[id] = struct{}{}
	s.small = nil
}

// Len is the number of distinct ids added.
func (s *TraceSet) Len() int {
	if s.large != nil {
		return len(s.large)
	}
	return len(s.small)
}
