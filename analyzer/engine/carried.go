package engine

import (
	"slices"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// Which of the attribute keys the run's detectors declared each trace carries, recorded in
// inference's one pass over every attribute (known.read) for Trace.CarriesAttr.

// maxCarried bounds the keys a carriedIndex indexes: one bit of a trace's TraceIndex.Carried
// each. Trace.CarriesAttr answers any key past them by a scan, as it does an undeclared key.
const maxCarried = 64

// carriedIndex numbers the attribute keys the run's detectors declared they ask
// Trace.CarriesAttr about (analyzer.Detector.CarriedAttrs), so that inference's one pass over
// every attribute (known.read) also records which of them each trace carries: a detector's
// question is then a bit test, not a pass over the trace's spans per detector.
type carriedIndex struct {
	// keys are the indexed keys, in the order the detectors declare them: bit k for keys[k].
	keys []string
	// byIndex is, for the well-known keys' own strings by spans.KeyIndex, 0 to decide by text
	// (see bit), 1 for a key not indexed, k+2 for keys[k]: a span's keys are nearly all those
	// strings, and a table lookup is cheaper than comparing each with every declared key.
	byIndex [256]uint8
}

// newCarriedIndex indexes the keys detectors declare, the first maxCarried of them; nil when
// they declare none.
func newCarriedIndex(detectors []*analyzer.Detector) *carriedIndex {
	var keys []string
	for _, d := range detectors {
		if d == nil {
			continue
		}
		for _, k := range d.CarriedAttrs {
			if k != "" && len(keys) < maxCarried && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	c := &carriedIndex{keys: keys}
	for i, key := range spans.WellKnown {
		if i >= len(c.byIndex) || spans.KeyIndex(key) != i {
			continue // the list changed since the spans package started: bit decides by text
		}
		c.byIndex[i] = 1
		if k := slices.Index(c.keys, key); k >= 0 {
			c.byIndex[i] = uint8(k + 2)
		}
	}
	return c
}

// bit is the bit of key (whose spans.KeyIndex is ki) among c's keys, 0 when c does not index it.
// Small enough to inline in known.read's loop over every attribute: a well-known key's own string
// costs a table lookup.
func (c *carriedIndex) bit(ki int, key string) uint64 {
	if ki >= 0 && ki < len(c.byIndex) {
		if b := c.byIndex[ki]; b >= 2 {
			return 1 << (b - 2)
		} else if b == 1 {
			return 0
		}
	}
	return c.byText(key)
}

// byText is bit for a key that is not a well-known key's own string.
func (c *carriedIndex) byText(key string) uint64 {
	for k := range c.keys {
		if c.keys[k] == key {
			return 1 << k
		}
	}
	return 0
}

// indexed is what a trace's TraceIndex.CarriedKeys holds once its attributes are read: c's
// keys, nil for none.
func (c *carriedIndex) indexed() []string {
	if c == nil {
		return nil
	}
	return c.keys
}
