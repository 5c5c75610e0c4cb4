package analyzer

import (
	"cmp"
	"slices"
)

// LeafChain is one leaf dependency of one trace with every layer above it: what the seed's
// "3 x 3 x 3 = 27 calls" line is made of. Copies of one leaf operation made by the retries of
// the layers above (equal IntentKey) are counted together, so the count is from the root.
type LeafChain struct {
	// Dependency and Service name the leaf (origin of its first call, callee service.name).
	Dependency string
	Service    string
	// LeafCalls are the physical calls that reached the leaf for this one intent.
	LeafCalls int
	// Layers are every layer on the path, top first: the owning service and the most tries any
	// of its copies made.
	Layers []Layer
	// Leaves are the leaf operations (all the copies).
	Leaves []*Operation
}

// RetryingLayers are the layers that tried more than once.
func (c *LeafChain) RetryingLayers() []Layer {
	var out []Layer
	for _, l := range c.Layers {
		if l.Attempts > 1 {
			out = append(out, l)
		}
	}
	return out
}

// LeafChains groups the leaf operations of one trace by intent and measures each chain. The
// result is ordered by LeafCalls, most first, then by dependency.
func LeafChains(ops []*Operation) []LeafChain {
	// Few chains per trace: a linear scan, with a map past 16 (many distinct siblings).
	var byIntent map[uint64]int
	var out []LeafChain
	for _, op := range ops {
		if !op.IsLeaf() || len(op.Attempts) == 0 {
			continue
		}
		k := -1
		if byIntent != nil {
			if v, ok := byIntent[op.intent]; ok {
				k = v
			}
		} else {
			for j := range out {
				if out[j].Leaves[0].intent == op.intent {
					k = j
					break
				}
			}
		}
		if k < 0 {
			k = len(out)
			out = append(out, LeafChain{Dependency: op.Dependency, Service: op.DependencyService})
			if byIntent != nil {
				byIntent[op.intent] = k
			} else if len(out) > 16 {
				byIntent = make(map[uint64]int, 64)
				for j := range out[:len(out)-1] {
					byIntent[out[j].Leaves[0].intent] = j
				}
				byIntent[op.intent] = k
			}
		}
		c := &out[k]
		c.LeafCalls += op.PhysicalCalls()
		c.Leaves = append(c.Leaves, op)
		depth := 0
		for p := op; p != nil; p = p.Parent {
			depth++
		}
		if len(c.Layers) < depth {
			c.Layers = append(c.Layers, make([]Layer, depth-len(c.Layers))...)
		}
		d := depth - 1
		for p := op; p != nil; p = p.Parent {
			l := &c.Layers[d]
			if l.Service == "" {
				l.Service = p.Owner
			}
			l.Attempts = max(l.Attempts, p.Tries())
			d--
		}
	}
	slices.SortStableFunc(out, func(a, b LeafChain) int {
		if c := cmp.Compare(b.LeafCalls, a.LeafCalls); c != 0 {
			return c
		}
		return cmp.Compare(a.Dependency, b.Dependency)
	})
	return out
}
