package audit

import (
	"slices"

	"github.com/stormwatch/stormwatch/spans"
)

// smallSet is how many members a Set keeps in a slice before it moves them to a map.
const smallSet = 16

// Set is a set for the detectors, which mostly hold a few members (the traces behind a group of
// operations up to a threshold, the dependencies reported in one trace, the operations above a
// chain's leaves) and now and then as many as a wide trace has: a few members live in a slice,
// searched linearly, and only a set that outgrows it pays for a map, so that a detector asking
// once per operation stays linear in the operations. The zero value is an empty set.
type Set[K comparable] struct {
	small []K
	large map[K]struct{}
}

// TraceSet is a set of trace ids for the windowed detectors, which count the distinct traces
// (independent requests) behind a group of operations.
type TraceSet = Set[spans.TraceID]

// Add puts k in the set and reports whether it was not in it yet.
func (s *Set[K]) Add(k K) bool {
	if s.large != nil {
		n := len(s.large)
		s.large[k] = struct{}{}
		return len(s.large) > n
	}
	// Members come in runs (the operations of one trace, the layers of one leaf): the one just
	// added is the likeliest repeat.
	if n := len(s.small); n > 0 && s.small[n-1] == k || slices.Contains(s.small, k) {
		return false
	}
	if len(s.small) < smallSet {
		s.small = append(s.small, k)
		return true
	}
	s.large = make(map[K]struct{}, 2*smallSet)
	for _, x := range s.small {
		s.large[x] = struct{}{}
	}
	s.large[k] = struct{}{}
	s.small = nil
	return true
}

// Has reports whether k is in the set.
func (s *Set[K]) Has(k K) bool {
	if s.large != nil {
		_, ok := s.large[k]
		return ok
	}
	return slices.Contains(s.small, k)
}

// Len is the number of distinct members added.
func (s *Set[K]) Len() int {
	if s.large != nil {
		return len(s.large)
	}
	return len(s.small)
}
