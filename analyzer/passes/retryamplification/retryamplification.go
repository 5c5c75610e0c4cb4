package retryamplification

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/spans"
)

// Detector is the retry-amplification detector.
var Detector = &analyzer.Detector{
	Name:     "retry-amplification",
	Title:    "Retries multiplied across layers",
	Doc:      "two or more layers on one root-to-leaf path retried, multiplying the calls that reached the leaf dependency; evidence: factor, leaf_calls, layers, layers_not_listed, added_latency_ms",
	Severity: analyzer.SeverityWarning,
	Settings: &Settings{MinRetryingLayers: 2, CriticalFactor: 9},
	Run:      run,
}

// Settings are retry-amplification's own (analyzer.Detector.Settings).
type Settings struct {
	// MinRetryingLayers is how many retrying layers on one root-to-leaf path make it fire: one
	// layer retrying is not amplification (unbounded-retries judges it).
	MinRetryingLayers int `policy:"minRetryingLayers" doc:"retrying layers on one root-to-leaf path that make it fire" min:"2"`
	// CriticalFactor is the amplification factor (leaf calls per root request) from which a
	// finding is critical rather than a warning: two layers of three attempts each already
	// multiply a failing dependency's load by nine.
	CriticalFactor int `policy:"criticalFactor" doc:"leaf calls per root request from which a finding is critical, not a warning" min:"1"`
}

// maxSpanIDs bounds the span ids named by one finding: the factor says how many there were.
const maxSpanIDs = 100

// maxLayers bounds the retrying layers one finding lists, in its summary and its evidence: the half
// at the top and the half nearest the leaf, with the count of those between (layers_not_listed). A
// recursive service retrying at every level n deep has n leaves whose chains are up to n layers
// deep, and listing them all would make the report the square of the trace.
const maxLayers = 64

func run(pass *analyzer.Pass) error {
	set := analyzer.SettingsOf[Settings](pass)
	need := set.MinRetryingLayers
	if !mayFire(pass.Operations, need) {
		return nil
	}
	classes := audit.ClassesIn(audit.Policy(pass.RunSettings), pass.Trace)
	chains := analyzer.RetryingChains(pass.Operations, need, maxLayers/2)
	var inferred [][]hole
	if len(chains) > 0 && anyInferred(pass.Trace, pass.Operations) {
		inferred = inferredLayers(pass.Trace, pass.Operations, chains)
	}
	for k, c := range chains {
		layers, retrying := c.Ends, c.Retrying
		sev := analyzer.SeverityWarning
		if c.LeafCalls >= set.CriticalFactor {
			sev = analyzer.SeverityCritical
		}
		calls := make([]spans.SpanID, 0, c.LeafCalls) // LeafCalls counts them
		for _, op := range c.Leaves {
			for i := range op.Attempts {
				calls = append(calls, op.Attempts[i].Calls...)
			}
		}
		// Sorted as their hex strings would sort (lowercase hex keeps the bytes' order, and so do
		// big-endian integers), then rendered: only the ids the finding keeps become strings.
		slices.SortFunc(calls, func(a, b spans.SpanID) int {
			return cmp.Compare(binary.BigEndian.Uint64(a[:]), binary.BigEndian.Uint64(b[:]))
		})
		if len(calls) > maxSpanIDs {
			calls = calls[:maxSpanIDs]
		}
		var ids []string
		if len(calls) > 0 {
			ids = audit.HexIDs(calls)
		}
		unlisted := retrying - len(layers)
		ev := make([]analyzer.Evidence, len(layers))
		// The summary names each owner with tries read from its callee's spans once: a hole is
		// its owner's total on the chain, the same at each of its layers (a recursive service's
		// untraced hops), so the summary says how many layers are the owner's instead of
		// repeating the total at each.
		var said []saidOwner
		for i, l := range layers {
			ev[i] = analyzer.Evidence{"service": analyzer.Text(l.Service), "attempts": analyzer.Int(l.Attempts)}
			if inferred != nil && inferred[k][i].inferred > 0 {
				h := inferred[k][i]
				ev[i]["inferred_from"] = analyzer.Text(h.callee + " SERVER spans")
				ev[i]["inferred_tries"] = analyzer.Int(h.inferred)
				if j := slices.IndexFunc(said, func(o saidOwner) bool { return o.service == l.Service }); j >= 0 {
					said[j].layers++
				} else {
					said = append(said, saidOwner{l.Service, h, 1})
				}
			}
		}
		evidence := analyzer.Evidence{
			"factor":     analyzer.Int(c.LeafCalls),
			"leaf_calls": analyzer.Int(c.LeafCalls),
			"layers":     analyzer.Records(ev),
		}
		if unlisted > 0 {
			evidence["layers_not_listed"] = analyzer.Int(unlisted)
		}
		if ms, ok := addedLatency(pass.Trace, c.Leaves[0]); ok {
			evidence["added_latency_ms"] = analyzer.Float(ms)
		}
		// The summary and the action are written into one buffer and cut from one string: a
		// storm draws this finding on every trace.
		var textBuf [512]byte
		b := strconv.AppendInt(textBuf[:0], int64(retrying), 10)
		b = append(b, " layers retried ("...)
		// Each layer as "service xN", ", " between, and the count of those not listed in the
		// middle (after the top half).
		for i := range len(layers) + 1 {
			if unlisted > 0 && i == maxLayers/2 {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = strconv.AppendInt(b, int64(unlisted), 10)
				b = append(b, " more"...)
			}
			if i == len(layers) {
				break
			}
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, layers[i].Service...)
			b = append(b, " x"...)
			b = strconv.AppendInt(b, int64(layers[i].Attempts), 10)
		}
		b = append(b, "): "...)
		b = strconv.AppendInt(b, int64(c.LeafCalls), 10)
		b = append(b, " calls to "...)
		if c.Service != "" && c.Service != c.Dependency {
			b = append(b, c.Service...)
			b = append(b, " ("...)
			b = append(b, c.Dependency...)
			b = append(b, ')')
		} else {
			b = append(b, c.Dependency...)
		}
		b = append(b, " for 1 request"...)
		if len(said) > 0 {
			b = append(b, "; tries with no span of their own were counted from the callee's SERVER spans: "...)
			for i, o := range said {
				if i > 0 {
					b = append(b, ", "...)
				}
				b = append(b, o.service...)
				if o.layers > 1 {
					b = append(b, ", "...)
					b = strconv.AppendInt(b, int64(o.layers), 10)
					b = append(b, " layers:"...)
				}
				b = append(b, ' ')
				b = strconv.AppendInt(b, int64(o.inferred), 10)
				b = append(b, " of "...)
				b = strconv.AppendInt(b, int64(o.tries), 10)
				b = append(b, " ("...)
				b = append(b, o.callee...)
				b = append(b, "'s)"...)
			}
		}
		cut := len(b)
		b = appendOwnerAdvice(b, &classes, c, layers)
		text := string(b)
		pass.Report(analyzer.Finding{
			Severity:   sev,
			SpanIDs:    ids,
			Service:    layers[0].Service,
			Dependency: c.Dependency,
			Summary:    text[:cut],
			Action:     text[cut:],
			Evidence:   evidence,
		})
	}
	return nil
}

// addedLatency is the added latency, in milliseconds, of the request whose trace holds the leaf
// operation's first call (the driver measured it, Trace.AddedLatency); false when the operation has
// no call in the trace or its root is not a request.
func addedLatency(t *analyzer.Trace, leaf *analyzer.Operation) (float64, bool) {
	if len(leaf.Attempts) == 0 || len(leaf.Attempts[0].Calls) == 0 {
		return 0, false
	}
	i, ok := t.Lookup(leaf.Attempts[0].Calls[0])
	if !ok {
		return 0, false
	}
	ns, ok := t.AddedLatency(i)
	return math.Round(float64(ns)/1e3) / 1e3, ok
}

// mayFire is the cheap first look, so that most traces cost no allocation: a chain's layers are
// the depths (counted from the root) of the operations above its leaves, and a layer retried when
// one of its operations made more than one try. A chain can only have as many retrying layers as
// there are depths at which some leaf's ancestor (or the leaf) retried, so fewer such depths than
// needed means no finding. Chains deeper than 64 layers are left to the full count.
func mayFire(ops []*analyzer.Operation, need int) bool {
	if need <= 0 {
		return true
	}
	var depths uint64
	var tries analyzer.TryCounter
	for _, op := range ops {
		if !op.IsLeaf() || len(op.Attempts) == 0 {
			continue
		}
		depth := 0
		for p := op; p != nil; p = p.Parent {
			depth++
		}
		if depth > 64 {
			return true
		}
		d := depth - 1
		for p := op; p != nil; p = p.Parent {
			if tries.Tries(p) > 1 {
				depths |= 1 << d
			}
			d--
		}
		if bits.OnesCount64(depths) >= need {
			return true // enough already: the full count decides
		}
	}
	return false
}

// saidOwner is an owner the summary names with its tries read from its callee's spans, and how
// many of the chain's listed layers are its.
type saidOwner struct {
	service string
	hole
	layers int
}

// hole is what inferredLayers found of one layer: of its owner's tries on the chain (every
// operation of that owner on the paths from the chain's leaves to the root), how many were read
// from its callee's SERVER spans, and whose they were (the first such operation's, walking up from
// each leaf in turn). inferred is 0 for a layer with no such try.
type hole struct {
	callee          string
	inferred, tries int
}

// anyInferred reports whether any try of ops was read from its callee's SERVER span: when none
// was (most traces), no chain has a layer for inferredLayers to find, and its walk of the trace's
// operations is not made.
func anyInferred(t *analyzer.Trace, ops []*analyzer.Operation) bool {
	for _, op := range ops {
		for i := range op.Attempts {
			if j, ok := t.Lookup(op.Attempts[i].SpanID); ok && t.Spans[j].Kind == spans.KindServer {
				return true
			}
		}
	}
	return false
}

// inferredLayers says, for each chain and each of its listed layers (Ends), which tries of the
// layer's owner on the chain the engine read from the callee's SERVER spans because the caller's
// own spans are missing (a service that exports nothing, attempt spans that never ended, a hop
// below the instrumentation): such a try's span is the callee's SERVER span, not a CLIENT one.
//
// A chain's operations are as many as its depth, and a comb has as many reported chains as
// levels, so it reads no chain's operations: one walk down the trace's operations keeps, for each
// owner a layer is listed under, the operations of that owner on the current path, each with the
// sums of that owner's tries from the root down to it. At a leaf, an owner's sums on its path are
// its nearest operation's. The operations of a chain of several leaves (copies) are their paths'
// union: met in pre-order, each leaf's path adds what lies below where it parts from the previous
// leaf's (their nearest common operation, found on the current path by its pre-order number).
func inferredLayers(t *analyzer.Trace, ops []*analyzer.Operation, chains []analyzer.LeafChain) [][]hole {
	// The owners asked about, each a number, and each chain's owners by its Ends.
	owner := map[string]int32{}
	nEnds := 0
	for k := range chains {
		for _, l := range chains[k].Ends {
			if _, ok := owner[l.Service]; !ok {
				owner[l.Service] = int32(len(owner))
			}
		}
		nEnds += len(chains[k].Ends)
	}
	// The operations as a tree: every operation and its ancestors numbered, their children
	// listed by parent (counted, then placed).
	at := make(map[*analyzer.Operation]int32, len(ops))
	list := slices.Clone(ops)
	for k, op := range list {
		at[op] = int32(k)
	}
	ns := make([]opAt, 0, len(list))
	for k := 0; k < len(list); k++ {
		z := opAt{parent: -1, chain: -1}
		if p := list[k].Parent; p != nil {
			j, ok := at[p]
			if !ok {
				j = int32(len(list))
				at[p] = j
				list = append(list, p)
			}
			z.parent = j
		}
		ns = append(ns, z)
	}
	n := len(list)
	// Counted: first[k+1] is where k's children start (k = -1: the roots); placed, each start is
	// moved to its end, so that k's children are kids[first[k]:first[k+1]], the roots kids[:first[0]].
	first := make([]int32, n+2)
	for k := range ns {
		first[ns[k].parent+2]++
	}
	for k := 2; k < len(first); k++ {
		first[k] += first[k-1]
	}
	kids := make([]int32, n)
	for k := range ns {
		p := ns[k].parent
		kids[first[p+1]] = int32(k)
		first[p+1]++
	}
	// Each chain's owners, distinct, in the order of its Ends, with their sums; and its leaves.
	type sums struct {
		owner           int32
		tries, inferred int
		callee          string
		calleeLeaf      int // the chain's leaf the callee was found above (its index in Leaves)
	}
	var all []sums
	chainAt := make([]int32, len(chains)+1) // chain k's sums: all[chainAt[k]:chainAt[k+1]]
	slot := make([]int32, 0, nEnds)         // each chain's Ends in turn: its owner's sums in all
	lastSums := make([]int32, len(owner))   // each owner's latest sums in all
	for k := range chains {
		c := &chains[k]
		chainAt[k] = int32(len(all))
		for _, l := range c.Ends {
			o := owner[l.Service]
			if s := lastSums[o]; len(all) == 0 || s < chainAt[k] || all[s].owner != o {
				lastSums[o] = int32(len(all))
				all = append(all, sums{owner: o, calleeLeaf: len(c.Leaves)})
			}
			slot = append(slot, lastSums[o])
		}
		for j, leaf := range c.Leaves {
			z := &ns[at[leaf]]
			z.chain, z.leaf = int32(k), int32(j)
		}
	}
	chainAt[len(chains)] = int32(len(all))
	prevLeaf := make([]int32, len(chains))
	for k := range prevLeaf {
		prevLeaf[k] = -1
	}
	// Down the tree in pre-order. For an operation of an owner asked about: its owner's sums from
	// the root down to it, and the nearest operation at or above it of that owner with a callee.
	stacks := make([][]int32, len(owner)) // each owner's operations on the current path, top first
	var path []int32                      // the current path, top first
	counter := int32(0)
	enter := func(v int32) {
		z := &ns[v]
		z.pre, z.depth = counter, int32(len(path))
		counter++
		path = append(path, v)
		op := list[v]
		o, ok := owner[op.Owner]
		if !ok {
			z.owner = -1
			return
		}
		z.owner = o
		z.tries, z.withCallee = len(op.Attempts), -1
		for i := range op.Attempts {
			if j, ok := t.Lookup(op.Attempts[i].SpanID); ok && t.Spans[j].Kind == spans.KindServer {
				z.inferred++
				if z.callee == "" {
					z.callee = t.Spans[j].Service()
				}
			}
		}
		if z.callee != "" {
			z.withCallee = v
		}
		if st := stacks[o]; len(st) > 0 {
			same := &ns[st[len(st)-1]]
			z.tries += same.tries
			z.inferred += same.inferred
			if z.withCallee < 0 {
				z.withCallee = same.withCallee
			}
		}
		stacks[o] = append(stacks[o], v)
	}
	atLeaf := func(v int32) {
		k, j := ns[v].chain, ns[v].leaf
		// Where the leaf's path parts from the previous leaf's: the deepest operation on it at or
		// before that leaf in pre-order (an ancestor of both).
		parts := int32(-1)
		if a := prevLeaf[k]; a >= 0 {
			i, _ := slices.BinarySearchFunc(path, ns[a].pre, func(u, x int32) int { return cmp.Compare(ns[u].pre, x) })
			if i == len(path) || ns[path[i]].pre > ns[a].pre {
				i--
			}
			parts = int32(i)
		}
		prevLeaf[k] = v
		for s := chainAt[k]; s < chainAt[k+1]; s++ {
			z := &all[s]
			st := stacks[z.owner]
			if len(st) == 0 {
				continue
			}
			top := &ns[st[len(st)-1]]
			z.tries += top.tries
			z.inferred += top.inferred
			if parts >= 0 {
				// Less the owner's sums down to the parting operation: counted with the
				// previous leaf.
				i, _ := slices.BinarySearchFunc(st, parts+1, func(u, d int32) int { return cmp.Compare(ns[u].depth, d) })
				if i > 0 {
					z.tries -= ns[st[i-1]].tries
					z.inferred -= ns[st[i-1]].inferred
				}
			}
			if w := top.withCallee; w >= 0 && int(j) < z.calleeLeaf {
				z.calleeLeaf, z.callee = int(j), ns[w].callee
			}
		}
	}
	// The walk: each operation entered, its children in turn, then left.
	type frame struct{ op, next int32 }
	var todo []frame
	for _, r := range kids[:first[0]] {
		todo = append(todo, frame{r, first[r]})
		enter(r)
		for len(todo) > 0 {
			f := &todo[len(todo)-1]
			if f.next < first[f.op+1] {
				ch := kids[f.next]
				f.next++
				todo = append(todo, frame{ch, first[ch]})
				enter(ch)
				continue
			}
			v := f.op
			if ns[v].chain >= 0 {
				atLeaf(v)
			}
			todo = todo[:len(todo)-1]
			path = path[:len(path)-1]
			if o := ns[v].owner; o >= 0 {
				stacks[o] = stacks[o][:len(stacks[o])-1]
			}
		}
	}
	out := make([][]hole, len(chains))
	buf := make([]hole, nEnds)
	e := 0
	for k := range chains {
		out[k], buf = buf[:len(chains[k].Ends):len(chains[k].Ends)], buf[len(chains[k].Ends):]
		for i := range out[k] {
			if z := &all[slot[e]]; z.inferred > 0 {
				out[k][i] = hole{callee: z.callee, inferred: z.inferred, tries: z.tries}
			}
			e++
		}
	}
	return out
}

// opAt is what inferredLayers knows of one operation of the trace.
type opAt struct {
	parent      int32 // -1 at a root
	chain, leaf int32 // a reported chain's leaf: the chain and its index in Leaves (else -1)
	pre, depth  int32 // its place in the walk's pre-order, and its depth (0 at a root)
	owner       int32 // the number of its owner, -1 when no listed layer is under that owner
	// Of an owner asked about: its owner's tries and those read from SERVER spans, summed from
	// the root down to it; its own first callee (the service of its first SERVER span try); the
	// nearest operation at or above it of its owner with a callee (-1: none).
	tries, inferred int
	callee          string
	withCallee      int32
}

// appendOwnerAdvice names the layer that should own the retries: the policy's owner for the leaf
// operations' class when the file names one, else the layer nearest the dependency.
func appendOwnerAdvice(b []byte, classes *audit.Classes, c analyzer.LeafChain, layers []analyzer.Layer) []byte {
	if len(c.Leaves) > 0 {
		cls := classes.Of(c.Leaves[0])
		if audit.FromFile(cls.Owner) {
			b = append(b, "let "...)
			b = append(b, cls.Owner.Value...)
			b = append(b, " own the retries, as the policy says (owner at "...)
			b = append(b, cls.Owner.Pos.FileLine()...)
			return append(b, "), and make the other layers fail fast"...)
		}
	}
	b = append(b, "let one layer own retries ("...)
	b = append(b, layers[len(layers)-1].Service...)
	return append(b, " is nearest the dependency) and make the others fail fast, or share one retry budget across the layers"...)
}
