package analyzer

import (
	"cmp"
	"encoding/binary"
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
// them per leaf; a chain's count and ends are read from its node (paths.chainNode), made from the
// node of the depth above it: a comb of n levels whose every level retries, even copied by a retry
// above it, costs its operations and a few layers per chain, not n chains of n layers.
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
			c.measureEnds(&x, half)
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

// measureEnds fills c's Retrying and Ends (see RetryingChains) without measuring every layer: the
// chain's node (paths.chainNode) counts its retrying layers and lists them from either end.
func (c *LeafChain) measureEnds(x *paths, half int) {
	n := x.chainNode(c.Leaves)
	c.Retrying = int(n.retrying)
	if c.Retrying == 0 {
		return
	}
	// The retrying layers nearest the leaf, from the bottom of ends up; and, past twice half,
	// the half at the top from the half-th retrying layer from the top up.
	ends := make([]Layer, min(c.Retrying, 2*half))
	fill := func(ends []Layer, up int32) {
		for i := len(ends) - 1; i >= 0; i-- {
			ends[i] = x.layer(up)
			up = x.nodes[up].above
		}
	}
	if c.Retrying <= 2*half {
		fill(ends, n.up)
	} else {
		fill(ends[:half], n.top)
		fill(ends[half:], n.up)
	}
	c.Ends = ends
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
	// merged are the nodes of the copies' operations at one depth (chainNode), keyed by those
	// operations' nodes in order; made once a chain's walk up is long. mark and stamp find an
	// operation met twice in one step of a wide walk (marked).
	merged map[string]int32
	mark   []uint32
	stamp  uint32
	key    []byte
}

// mergedOp is an operation at one depth of a chain's merged paths, and the first of the chain's
// leaves under it (its order among the depth's operations).
type mergedOp struct {
	op    *Operation
	first int32
}

// chainNode is the node of a chain of leaves: the leaf's own when there is one, else the leaves'
// paths merged depth by depth. At each depth the chain's layer is the operations its leaves pass
// through, in the order of the first leaf through each (its owner names the layer), their most
// tries the layer's tries; its node is made from the node of the depth above as an operation's
// is from its parent's. Walking up from the deepest leaves, the merge ends where the copies join
// into one operation (its own node is the rest), or at a depth's operations that a long walk met
// before: once every leaf has joined, the depths above merge the same whichever chain asks, so a
// comb whose copies part at the top merges each depth once, not once per chain below it.
func (x *paths) chainNode(leaves []*Operation) pathNode {
	if len(leaves) == 1 {
		return x.node(leaves[0])
	}
	var byDepthArr [32]leafAt
	byDepth := byDepthArr[:0] // the leaves, deepest first, in order within a depth
	for j, l := range leaves {
		byDepth = append(byDepth, leafAt{mergedOp{l, int32(j)}, x.node(l).depth})
	}
	slices.SortStableFunc(byDepth, func(a, b leafAt) int { return cmp.Compare(b.depth, a.depth) })
	// Up from the deepest: each depth's operations kept (flat, from where each starts) until
	// the node above them is known.
	var levelArr, nextArr [32]mergedOp
	level, next := levelArr[:0], nextArr[:0]
	var keptArr [128]mergedOp
	var startsArr [16]int32
	kept, starts := keptArr[:0], startsArr[:0]
	joined := 0 // the depths kept since every leaf joined: the ones the map may keep
	above := pathNode{up: -1, above: -1, top: -1}
	j := 0
	for d := byDepth[0].depth; d > 0; d-- {
		if d < byDepth[0].depth {
			// Each parent once, in the order of its first leaf: found among the parents so far
			// by a scan while they are few, then by a mark on its node for this step.
			next = next[:0]
			x.stamp++
			marking := false
			for _, e := range level {
				p := e.op.Parent
				if !marking && len(next) == 32 {
					for _, e := range next {
						x.marked(e.op)
					}
					marking = true
				}
				if marking && x.marked(p) || !marking && slices.ContainsFunc(next, func(e mergedOp) bool { return e.op == p }) {
					continue
				}
				next = append(next, mergedOp{p, e.first})
			}
			level, next = next, level
		}
		if k := j; j < len(byDepth) && byDepth[j].depth == d {
			for j < len(byDepth) && byDepth[j].depth == d {
				j++
			}
			level, next = joinLeaves(level, byDepth[k:j], next), level
		}
		if j == len(byDepth) {
			if len(level) == 1 {
				above = x.node(level[0].op)
				break
			}
			if x.merged != nil { // kept by a long walk
				if k, ok := x.merged[string(x.keyOf(level))]; ok {
					above = x.nodes[k]
					break
				}
			}
			joined++
		}
		starts = append(starts, int32(len(kept)))
		kept = append(kept, level...)
	}
	// Down again, each depth's node from the one above.
	remember := x.merged != nil || joined > 16
	if remember && x.merged == nil {
		x.merged = make(map[string]int32, joined)
	}
	for i := len(starts) - 1; i >= 0; i-- {
		end := len(kept)
		if i+1 < len(starts) {
			end = int(starts[i+1])
		}
		ops := kept[starts[i]:end]
		tries := 0
		for _, e := range ops {
			tries = max(tries, x.tries.Tries(e.op))
		}
		k := x.add(above, ops[0].op, tries)
		if remember && i >= len(starts)-joined {
			x.merged[string(x.keyOf(ops))] = k
		}
		above = x.nodes[k]
	}
	return above
}

// marked marks op's node for this step of a walk (stamp) and says whether it was marked already.
func (x *paths) marked(op *Operation) bool {
	k := x.index(op)
	if int(k) >= len(x.mark) {
		x.mark = append(x.mark, make([]uint32, int(k)+1-len(x.mark)+len(x.mark)/2)...)
	}
	was := x.mark[k] == x.stamp
	x.mark[k] = x.stamp
	return was
}

// leafAt is a leaf of a chain whose paths chainNode merges, and its depth.
type leafAt struct {
	mergedOp
	depth int32
}

// joinLeaves merges the leaves that join a chain's walk at one depth into its operations there,
// both in the order of their first leaf, in into's room.
func joinLeaves(level []mergedOp, leaves []leafAt, into []mergedOp) []mergedOp {
	out := into[:0]
	i := 0
	for _, l := range leaves {
		for i < len(level) && level[i].first < l.first {
			out = append(out, level[i])
			i++
		}
		out = append(out, l.mergedOp)
	}
	return append(out, level[i:]...)
}

// keyOf is the key of a depth's operations in merged: their nodes' indexes, in order.
func (x *paths) keyOf(ops []mergedOp) []byte {
	x.key = x.key[:0]
	for _, e := range ops {
		x.key = binary.LittleEndian.AppendUint32(x.key, uint32(x.index(e.op)))
	}
	return x.key
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

// reserve sizes x for the n operations of a trace, each of which may be asked about, and a few
// depths of merged paths (chainNode): its map and nodes made once, not grown step by step.
func (x *paths) reserve(n int) {
	x.at = make(map[*Operation]int32, n)
	x.nodes = make([]pathNode, 0, n+16)
}

// node is what paths knows of op: the operations between it and the nearest one known are made
// top down, each from its parent's.
func (x *paths) node(op *Operation) pathNode { return x.nodes[x.index(op)] }

// index is the index of op's node in nodes, made as node says.
func (x *paths) index(op *Operation) int32 {
	if k, ok := x.at[op]; ok {
		return k
	}
	if x.at == nil {
		x.at = make(map[*Operation]int32)
	}
	var walkArr [16]*Operation
	walk := walkArr[:0] // the operations not known yet, op first
	parent, at := pathNode{up: -1, above: -1, top: -1}, int32(-1)
	for p := op; p != nil; p = p.Parent {
		if k, ok := x.at[p]; ok {
			parent = x.nodes[k]
			break
		}
		walk = append(walk, p)
	}
	for i := len(walk) - 1; i >= 0; i-- {
		p := walk[i]
		at = x.add(parent, p, x.tries.Tries(p))
		x.at[p] = at
		parent = x.nodes[at]
	}
	return at
}

// add makes the node of a layer under the node above, whose owner is op's and whose tries are
// tries (an operation's, or the most of a depth's in merged paths), and returns its index.
func (x *paths) add(above pathNode, op *Operation, tries int) int32 {
	k := int32(len(x.nodes))
	n := pathNode{op: op, depth: above.depth + 1, retrying: above.retrying, tries: int32(tries),
		up: above.up, above: above.above, top: above.top}
	if tries > 1 {
		n.retrying++
		n.up, n.above = k, above.up
		if n.retrying == x.half {
			n.top = k
		}
	}
	x.nodes = append(x.nodes, n)
	return k
}

// Layer is one service's retry loop on a root-to-leaf path.
type Layer struct {
	Service  string `json:"service"`
	Attempts int    `json:"attempts"`
}
