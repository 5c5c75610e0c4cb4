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

	depth int // of the deepest leaf: how many layers
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

// EndsOfRetryingLayers are the retrying layers when there are at most 2*half of them, else the
// first half and the last half, top first; n counts them all. A chain as deep as a trace lists no
// more of its layers than a shallow one, in one scan of them and no copy of the rest.
func (c *LeafChain) EndsOfRetryingLayers(half int) (ends []Layer, n int) {
	var last []Layer // the latest retrying layers past the first half, a ring of half
	for _, l := range c.Layers {
		if l.Attempts <= 1 {
			continue
		}
		switch {
		case n < half:
			ends = append(ends, l)
		case len(last) < half:
			last = append(last, l)
		default:
			last[(n-half)%half] = l
		}
		n++
	}
	if n <= 2*half {
		return append(ends, last...), n
	}
	k := (n - half) % half // the ring's oldest
	return append(append(ends, last[k:]...), last[:k]...), n
}

// LeafChains groups the leaf operations of one trace by intent and measures each chain. The
// result is ordered by LeafCalls, most first, then by dependency.
//
// A chain's layers are as many as its deepest leaf's depth, so a deep trace's answer is as big as
// its leaves times its depth: a comb (n nested calls, a leaf call at each level) has n chains of up
// to n layers. RetryingChains measures only the chains a finding names.
func LeafChains(ops []*Operation) []LeafChain {
	var x paths
	out := leafChains(ops, &x)
	nLayers := 0
	for k := range out {
		nLayers += out[k].depth
	}
	// Every chain's layers carved from one buffer.
	layerBuf := make([]Layer, nLayers)
	for k := range out {
		c := &out[k]
		c.Layers, layerBuf = layerBuf[:c.depth:c.depth], layerBuf[c.depth:]
		c.measure(&x)
	}
	return out
}

// RetryingChains are the chains of LeafChains, in its order, that have at least need retrying
// layers, only the first of each leaf dependency: the ones retry-amplification reports. Only those
// have their layers measured. Whether a chain has need retrying layers is read from its leaves'
// retrying ancestors, each operation's found from its parent's (paths), at most need of them per
// leaf: a comb of n levels whose leaf calls retry costs its operations, not n chains of n layers.
func RetryingChains(ops []*Operation, need int) []LeafChain {
	return retryingChains(ops, need, -1)
}

// FirstRetryingChain is the first of RetryingChains(ops, 1), alone measured: the chain a trace's
// view shows. False when no chain has a retrying layer.
func FirstRetryingChain(ops []*Operation) (LeafChain, bool) {
	if cs := retryingChains(ops, 1, 1); len(cs) > 0 {
		return cs[0], true
	}
	return LeafChain{}, false
}

// retryingChains is RetryingChains, stopping after limit chains (limit < 0: all).
func retryingChains(ops []*Operation, need, limit int) []LeafChain {
	var x paths
	all := leafChains(ops, &x)
	var depths []int32 // one chain's retrying depths, while fewer than need
	var reported map[string]bool
	kept := all[:0]
	for k := range all {
		c := all[k]
		if reported[c.Dependency] {
			continue
		}
		fires := false
		depths = depths[:0]
		for _, leaf := range c.Leaves {
			n := x.node(leaf)
			if int(n.retrying) >= need {
				fires = true
				break
			}
			for up := n.up; up >= 0; up = x.nodes[up].above {
				if d := x.nodes[up].depth; !slices.Contains(depths, d) {
					depths = append(depths, d)
				}
			}
			if len(depths) >= need {
				fires = true
				break
			}
		}
		if !fires {
			continue
		}
		if reported == nil {
			reported = map[string]bool{}
		}
		reported[c.Dependency] = true
		c.Layers = make([]Layer, c.depth)
		c.measure(&x)
		kept = append(kept, c)
		if len(kept) == limit {
			break
		}
	}
	return kept
}

// leafChains groups the leaf operations by intent, in op order: each chain's leaves, its leaf
// calls, and its Layers only as long as its deepest leaf is deep (to be filled by measure); the
// chains ordered as LeafChains orders them. The leaves are carved from one buffer: few chains per
// trace, found by a linear scan over each chain's first leaf, with a map past 16 chains (many
// distinct siblings).
func leafChains(ops []*Operation, x *paths) []LeafChain {
	x.reserve(len(ops))
	var chainOfArr [32]int32
	chainOf := chainOfArr[:0]
	type size struct {
		first  *Operation // the first leaf: names the chain
		leaves int
		depth  int32
	}
	var sizeArr [8]size
	sizes := sizeArr[:0]
	var byIntent map[uint64]int32
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
		z.depth = max(z.depth, x.node(op).depth)
	}
	if len(sizes) == 0 {
		return nil
	}
	out := make([]LeafChain, len(sizes))
	leafBuf := make([]*Operation, len(chainOf))
	for k := range sizes {
		z := &sizes[k]
		out[k] = LeafChain{Dependency: z.first.Dependency, Service: z.first.DependencyService,
			Leaves: leafBuf[:0:z.leaves], depth: int(z.depth)}
		leafBuf = leafBuf[z.leaves:]
	}
	j := 0
	for _, op := range ops {
		if !op.IsLeaf() || len(op.Attempts) == 0 {
			continue
		}
		c := &out[chainOf[j]]
		j++
		c.LeafCalls += op.PhysicalCalls()
		c.Leaves = append(c.Leaves, op)
	}
	slices.SortStableFunc(out, func(a, b LeafChain) int {
		if c := cmp.Compare(b.LeafCalls, a.LeafCalls); c != 0 {
			return c
		}
		return cmp.Compare(a.Dependency, b.Dependency)
	})
	return out
}

// measure fills c's layers (as many as c.depth, zero) from its leaves in order: each layer's
// service from the first leaf that reaches it, its attempts the most of any.
func (c *LeafChain) measure(x *paths) {
	for _, leaf := range c.Leaves {
		d := x.node(leaf).depth - 1
		for p := leaf; p != nil; p = p.Parent {
			l := &c.Layers[d]
			if l.Service == "" {
				l.Service = p.Owner
			}
			l.Attempts = max(l.Attempts, x.tries.Tries(p))
			d--
		}
	}
}

// paths answers, for the operations of one trace, each one's depth (1 at the top) and its retrying
// ancestors (itself included: the operations of more than one try), each operation's answer made
// once from its parent's. A comb (n nested calls, a leaf call at each level) asks about n leaves n
// deep, which a walk up from each would pay the square for.
type paths struct {
	at    map[*Operation]int32 // the node of each operation asked about or above one
	nodes []pathNode
	tries TryCounter
	walk  []*Operation
}

// pathNode is what paths knows of one operation. up and above make a list of its retrying
// ancestors, nearest first, shared with them: up is the nearest (its own node when it retried),
// above the next after up (up's parent's up); -1 ends it.
type pathNode struct {
	depth    int32
	retrying int32 // the retrying operations at or above it
	up       int32
	above    int32
}

// reserve sizes x for the n operations of a trace, each of which may be asked about: its map and
// nodes made once, not grown step by step.
func (x *paths) reserve(n int) {
	x.at = make(map[*Operation]int32, n)
	x.nodes = make([]pathNode, 0, n)
}

// node is what paths knows of op: the operations between it and the nearest one known are made
// top down, each from its parent's.
func (x *paths) node(op *Operation) pathNode {
	if k, ok := x.at[op]; ok {
		return x.nodes[k]
	}
	if x.at == nil {
		x.at = make(map[*Operation]int32)
	}
	x.walk = x.walk[:0]
	parent := pathNode{up: -1, above: -1}
	for p := op; p != nil; p = p.Parent {
		if k, ok := x.at[p]; ok {
			parent = x.nodes[k]
			break
		}
		x.walk = append(x.walk, p)
	}
	for i := len(x.walk) - 1; i >= 0; i-- {
		p := x.walk[i]
		k := int32(len(x.nodes))
		n := pathNode{depth: parent.depth + 1, retrying: parent.retrying, up: parent.up, above: parent.above}
		if x.tries.Tries(p) > 1 {
			n.retrying++
			n.up, n.above = k, parent.up
		}
		x.nodes = append(x.nodes, n)
		x.at[p] = k
		parent = n
	}
	return parent
}

// Layer is one service's retry loop on a root-to-leaf path.
type Layer struct {
	Service  string `json:"service"`
	Attempts int    `json:"attempts"`
}
