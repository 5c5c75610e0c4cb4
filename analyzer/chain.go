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
	// of its copies made. RetryingChains leaves them out and fills Ends and Retrying instead.
	Layers []Layer
	// Ends are the retrying layers at the two ends of the chain, top first (RetryingChains): all of
	// them when they are at most twice the half asked for, else that many at the top and as many
	// nearest the leaf.
	Ends []Layer
	// Retrying counts the chain's retrying layers, listed in Ends or not (RetryingChains).
	Retrying int
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

// LeafChains groups the leaf operations of one trace by intent and measures each chain. The
// result is ordered by LeafCalls, most first, then by dependency.
//
// A chain's layers are as many as its deepest leaf's depth, so a deep trace's answer is as big as
// its leaves times its depth: a comb (n nested calls, a leaf call at each level) has n chains of up
// to n layers. RetryingChains measures only the chains a finding names, and of those only the
// retrying layers a finding lists.
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
// layers, only the first of each leaf dependency: the ones retry-amplification reports. Each has
// its Retrying count and its Ends (the half retrying layers at the top and the half nearest the
// leaf, or all of them), not its Layers. Whether a chain has need retrying layers is read from
// its leaves' retrying ancestors, each operation's found from its parent's (paths), at most need of
// them per leaf; a chain's count and ends are its leaves' nearest common ancestor's, read from its
// paths node, and those of the layers below it, measured: a comb of n levels whose every level
// retries costs its operations and a few layers per chain, not n chains of n layers.
func RetryingChains(ops []*Operation, need, half int) []LeafChain {
	return retryingChains(ops, need, -1, half)
}

// FirstRetryingChain is the first of RetryingChains(ops, 1), alone measured, all its Layers: the
// chain a trace's view shows. False when no chain has a retrying layer.
func FirstRetryingChain(ops []*Operation) (LeafChain, bool) {
	if cs := retryingChains(ops, 1, 1, 0); len(cs) > 0 {
		return cs[0], true
	}
	return LeafChain{}, false
}

// retryingChains is RetryingChains, stopping after limit chains (limit < 0: all); half 0 measures
// every layer of each chain kept (Layers) instead of its ends.
func retryingChains(ops []*Operation, need, limit, half int) []LeafChain {
	x := paths{half: int32(half)}
	all := leafChains(ops, &x)
	var depths []int32 // one chain's retrying depths, while fewer than need
	// The dependencies reported: a few, compared one by one, in a map past 16 (a comb's chains
	// are as many as its levels, each of its own leaf).
	var reportedArr [16]string
	reported := reportedArr[:0]
	var reportedPast map[string]bool
	var belowArr [16]Layer
	below := belowArr[:0] // the layers under a chain's leaves' common ancestor, reused
	kept := all[:0]
	for k := range all {
		c := all[k]
		if reportedPast[c.Dependency] || reportedPast == nil && slices.Contains(reported, c.Dependency) {
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
		switch {
		case reportedPast != nil:
			reportedPast[c.Dependency] = true
		case len(reported) < cap(reported):
			reported = append(reported, c.Dependency)
		default:
			reportedPast = make(map[string]bool, 2*len(reported))
			for _, d := range reported {
				reportedPast[d] = true
			}
			reportedPast[c.Dependency] = true
		}
		if half > 0 {
			below = c.measureEnds(&x, half, below)
		} else {
			c.Layers = make([]Layer, c.depth)
			c.measure(&x)
		}
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

// measureEnds fills c's Retrying and Ends (see RetryingChains) without measuring every layer: down
// to the leaves' nearest common ancestor (the leaf itself, when the chain has one) the chain is one
// path, whose retrying operations x lists from either end; only the layers below it, where the
// copies' paths part, are measured as measure measures them, into below (reused; returned).
func (c *LeafChain) measureEnds(x *paths, half int, below []Layer) []Layer {
	// The common ancestor: each leaf's path joined with the ancestor so far, the deeper walked up
	// first. Each step is one on some leaf's path below the ancestor found in the end (or on the
	// first leaf's), which the layers below are measured over anyway.
	top, topDepth := c.Leaves[0], x.node(c.Leaves[0]).depth
	for _, leaf := range c.Leaves[1:] {
		p, d := leaf, x.node(leaf).depth
		for ; d > topDepth; d-- {
			p = p.Parent
		}
		for ; topDepth > d; topDepth-- {
			top = top.Parent
		}
		for p != top {
			p, top = p.Parent, top.Parent
			topDepth--
		}
	}
	// The layers below it, by depth: each one's service from the first leaf that reaches it, its
	// attempts the most of any; the retrying ones kept, in order, at the front of below.
	below = below[:0]
	if n := c.depth - int(topDepth); n > 0 {
		below = slices.Grow(below, n)[:n]
		clear(below)
		for _, leaf := range c.Leaves {
			d := int(x.node(leaf).depth-topDepth) - 1
			for p := leaf; p != top; p = p.Parent {
				l := &below[d]
				if l.Service == "" {
					l.Service = p.Owner
				}
				l.Attempts = max(l.Attempts, x.tries.Tries(p))
				d--
			}
		}
		below = slices.DeleteFunc(below, func(l Layer) bool { return l.Attempts <= 1 })
	}
	// Above: the retrying operations on the ancestor's path, nearest first.
	var above pathNode
	if top != nil {
		above = x.node(top)
	}
	// appendNearest appends the k retrying layers above that are nearest the leaf, top first.
	appendNearest := func(ends []Layer, k int) []Layer {
		ends = ends[:len(ends)+k]
		up := above.up
		for i := len(ends) - 1; i >= len(ends)-k; i-- {
			ends[i] = x.layer(up)
			up = x.nodes[up].above
		}
		return ends
	}
	r := int(above.retrying)
	c.Retrying = r + len(below)
	if c.Retrying == 0 {
		return below
	}
	ends := make([]Layer, 0, min(c.Retrying, 2*half))
	if c.Retrying <= 2*half {
		c.Ends = append(appendNearest(ends, r), below...)
		return below
	}
	// The half at the top: the first of those above, from the half-th retrying operation of the
	// path up (or all of them, when fewer), then the first below.
	if r >= half {
		ends = ends[:half]
		up := above.top
		for i := half - 1; i >= 0; i-- {
			ends[i] = x.layer(up)
			up = x.nodes[up].above
		}
	} else {
		ends = append(appendNearest(ends, r), below[:half-r]...)
	}
	// The half nearest the leaf: the last below, after the nearest above when fewer.
	if len(below) >= half {
		ends = append(ends, below[len(below)-half:]...)
	} else {
		ends = append(appendNearest(ends, half-len(below)), below...)
	}
	c.Ends = ends
	return below
}

// paths answers, for the operations of one trace, each one's depth (1 at the top) and its retrying
// ancestors (itself included: the operations of more than one try), each operation's answer made
// once from its parent's. A comb (n nested calls, a leaf call at each level) asks about n leaves n
// deep, which a walk up from each would pay the square for.
type paths struct {
	at    map[*Operation]int32 // the node of each operation asked about or above one
	nodes []pathNode
	tries TryCounter
	// half is the retrying operation, counted from the top, that a node's top names (0: none).
	half int32
}

// pathNode is what paths knows of one operation. up and above make a list of its retrying
// ancestors, nearest first, shared with them: up is the nearest (its own node when it retried),
// above the next after up (up's parent's up); -1 ends it.
type pathNode struct {
	op       *Operation
	depth    int32
	retrying int32 // the retrying operations at or above it
	tries    int32
	up       int32
	above    int32
	// top is the half-th retrying operation from the top at or above it (paths.half), -1 while
	// there are fewer: its list (up, above) is the top half of the node's, nearest first.
	top int32
}

// layer is the layer of the retrying operation at node k.
func (x *paths) layer(k int32) Layer {
	n := &x.nodes[k]
	return Layer{Service: n.op.Owner, Attempts: int(n.tries)}
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
	var walkArr [16]*Operation
	walk := walkArr[:0] // the operations not known yet, op first
	parent := pathNode{up: -1, above: -1, top: -1}
	for p := op; p != nil; p = p.Parent {
		if k, ok := x.at[p]; ok {
			parent = x.nodes[k]
			break
		}
		walk = append(walk, p)
	}
	for i := len(walk) - 1; i >= 0; i-- {
		p := walk[i]
		k := int32(len(x.nodes))
		n := pathNode{op: p, depth: parent.depth + 1, retrying: parent.retrying, tries: int32(x.tries.Tries(p)),
			up: parent.up, above: parent.above, top: parent.top}
		if n.tries > 1 {
			n.retrying++
			n.up, n.above = k, parent.up
			if n.retrying == x.half {
				n.top = k
			}
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
