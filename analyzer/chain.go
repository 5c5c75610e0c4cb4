package analyzer

import (
	"cmp"
	"slices"
)

// LeafChain is one leaf dependency of one trace with every layer above it: what
// docs/principles.md#one-budget-one-owner's "3 x 3 x 3 = 27 calls" line is made of. Copies of one
// leaf operation made by the retries of the layers above (equal IntentKey) are counted together, so
// the count is from the root.
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
	n := 0
	for _, l := range c.Layers {
		if l.Attempts > 1 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Layer, 0, n)
	for _, l := range c.Layers {
		if l.Attempts > 1 {
			out = append(out, l)
		}
	}
	return out
}

// LeafChains groups the leaf operations of one trace by intent and measures each chain. The
// result is ordered by LeafCalls, most first, then by dependency.
//
// It runs in two passes so that the chains, their leaves and their layers are three allocations
// whatever their number: the first finds each leaf's chain and each chain's size, the second
// fills slices carved from one buffer each.
func LeafChains(ops []*Operation) []LeafChain {
	// Pass 1. chainOf[j] is the chain of the j-th leaf. Few chains per trace: a linear scan
	// over each chain's first leaf, with a map past 16 chains (many distinct siblings).
	var chainOfArr [32]int32
	chainOf := chainOfArr[:0]
	type size struct {
		first  *Operation // the first leaf: names the chain
		leaves int
		depth  int
	}
	var sizeArr [8]size
	sizes := sizeArr[:0]
	var byIntent map[uint64]int32
	nLayers := 0
	for _, op := range ops {
		if !op.IsLeaf() || len(op.Attempts) == 0 {
			continue
		}
		k := int32(-1)
		if byIntent != nil {
			if v, ok := byIntent[op.built.Intent]; ok {
				k = v
			}
		} else {
			for j := range sizes {
				if sizes[j].first.built.Intent == op.built.Intent {
					k = int32(j)
					break
				}
			}
		}
		if k < 0 {
			k = int32(len(sizes))
			sizes = append(sizes, size{first: op})
			if byIntent != nil {
				byIntent[op.built.Intent] = k
			} else if len(sizes) > 16 {
				byIntent = make(map[uint64]int32, 64)
				for j := range sizes {
					byIntent[sizes[j].first.built.Intent] = int32(j)
				}
			}
		}
		chainOf = append(chainOf, k)
		z := &sizes[k]
		z.leaves++
		depth := 0
		for p := op; p != nil; p = p.Parent {
			depth++
		}
		if depth > z.depth {
			nLayers += depth - z.depth
			z.depth = depth
		}
	}
	if len(sizes) == 0 {
		return nil
	}
	// Pass 2: every chain's slices carved to its size; leaves and layers filled in op order,
	// each layer's service from the first leaf that reaches it, its attempts the most of any.
	out := make([]LeafChain, len(sizes))
	leafBuf := make([]*Operation, len(chainOf))
	layerBuf := make([]Layer, nLayers)
	for k := range sizes {
		z := &sizes[k]
		out[k] = LeafChain{Dependency: z.first.Dependency, Service: z.first.DependencyService,
			Leaves: leafBuf[:0:z.leaves], Layers: layerBuf[:z.depth:z.depth]}
		leafBuf, layerBuf = leafBuf[z.leaves:], layerBuf[z.depth:]
	}
	j := 0
	var tries TryCounter
	for _, op := range ops {
		if !op.IsLeaf() || len(op.Attempts) == 0 {
			continue
		}
		c := &out[chainOf[j]]
		j++
		c.LeafCalls += op.PhysicalCalls()
		c.Leaves = append(c.Leaves, op)
		depth := 0
		for p := op; p != nil; p = p.Parent {
			depth++
		}
		d := depth - 1
		for p := op; p != nil; p = p.Parent {
			l := &c.Layers[d]
			if l.Service == "" {
				l.Service = p.Owner
			}
			l.Attempts = max(l.Attempts, tries.Tries(p))
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

// Layer is one service's retry loop on a root-to-leaf path.
type Layer struct {
	Service  string `json:"service"`
	Attempts int    `json:"attempts"`
}
