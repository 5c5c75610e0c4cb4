package engine

import (
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The memory a trace's operations are made in: one buffer each for the operations, their attempts
// and the attempts' calls and origins, sized for the trace's calls, carved by grouping and reused
// from trace to trace (opsSpare) when the operations go on packed: made anew for every trace, they
// would be the analysis's largest allocation.

// opBufs hold one trace's operations as inference makes them. Operations, their attempts and the
// attempts' calls and origins are carved out of one buffer each, sized for the trace's CLIENT
// spans (none of them can outnumber the calls): a few allocations per trace (one for most, see
// make) instead of several per operation and per caller. Each carved slice is capped when
// complete, so nothing appended later can spill into a neighbour.
type opBufs struct {
	slab    []analyzer.Operation
	att     []analyzer.Attempt
	calls   []spans.SpanID
	origins []string
	// hexIDs is every call's span id in hex, 16 digits each by call index, made when the first
	// operation needs one for its id: one string for the trace instead of one per operation.
	hexIDs string
}

// make sizes the buffers for n calls and returns the operations' list, empty with room for n.
// A trace with up to 8 calls (most traces) gets all its buffers in one allocation of exactly its
// size, where separate buffers would be five; a larger one gets one per buffer.
func (b *opBufs) make(n int, spare *opsSpare) []*analyzer.Operation {
	if ops, ok := spare.take(b, n); ok {
		return ops
	}
	switch n {
	case 1:
		k := new(struct {
			o [1]*analyzer.Operation
			s [1]analyzer.Operation
			a [1]analyzer.Attempt
			c [1]spans.SpanID
			r [1]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 2:
		k := new(struct {
			o [2]*analyzer.Operation
			s [2]analyzer.Operation
			a [2]analyzer.Attempt
			c [2]spans.SpanID
			r [2]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 3:
		k := new(struct {
			o [3]*analyzer.Operation
			s [3]analyzer.Operation
			a [3]analyzer.Attempt
			c [3]spans.SpanID
			r [3]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 4:
		k := new(struct {
			o [4]*analyzer.Operation
			s [4]analyzer.Operation
			a [4]analyzer.Attempt
			c [4]spans.SpanID
			r [4]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 5:
		k := new(struct {
			o [5]*analyzer.Operation
			s [5]analyzer.Operation
			a [5]analyzer.Attempt
			c [5]spans.SpanID
			r [5]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 6:
		k := new(struct {
			o [6]*analyzer.Operation
			s [6]analyzer.Operation
			a [6]analyzer.Attempt
			c [6]spans.SpanID
			r [6]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 7:
		k := new(struct {
			o [7]*analyzer.Operation
			s [7]analyzer.Operation
			a [7]analyzer.Attempt
			c [7]spans.SpanID
			r [7]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 8:
		k := new(struct {
			o [8]*analyzer.Operation
			s [8]analyzer.Operation
			a [8]analyzer.Attempt
			c [8]spans.SpanID
			r [8]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	}
	return b.carve(make([]*analyzer.Operation, n), make([]analyzer.Operation, n), make([]analyzer.Attempt, n), make([]spans.SpanID, n), make([]string, n))
}

// compact moves the operations into a slab of their own size when the one sized for the trace's
// calls is mostly empty, and returns their list anew. Retries make several calls per operation
// (the amplification fixtures' operations fill a third of it), and operations held as values
// (Config.holdsOperationsPacked false) are held as long as the trace: the empty part was memory
// held and scanned by the garbage collector on every cycle. Operations point to their parent, so those pointers are moved along; nothing else
// points to an operation yet (calls and spans name theirs by index).
func (b *opBufs) compact(ops []*analyzer.Operation) []*analyzer.Operation {
	slab := b.slab
	if cap(slab) <= 8 || 4*len(slab) > 3*cap(slab) || len(ops) != len(slab) {
		// Small traces' buffers are one allocation with the rest; a slab grown past its first
		// (refused operations beyond the calls, not reached in practice) is left as it is.
		return ops
	}
	size := unsafe.Sizeof(analyzer.Operation{})
	base := uintptr(unsafe.Pointer(unsafe.SliceData(slab)))
	index := func(op *analyzer.Operation) int {
		off := uintptr(unsafe.Pointer(op)) - base
		if op == nil || off >= uintptr(len(slab))*size {
			return -1
		}
		return int(off / size)
	}
	for _, op := range ops {
		if index(op) < 0 || op.Parent != nil && index(op.Parent) < 0 {
			return ops
		}
	}
	fresh := make([]analyzer.Operation, len(slab))
	copy(fresh, slab)
	for i := range fresh {
		if p := fresh[i].Parent; p != nil {
			fresh[i].Parent = &fresh[index(p)]
		}
	}
	out := make([]*analyzer.Operation, len(ops))
	for k, op := range ops {
		out[k] = &fresh[index(op)]
	}
	b.slab = fresh
	return out
}

// opsSpare holds the arrays of operations that went on packed (see hold), or whose trace was
// evicted (its result dropped once published), for the next trace of the same scratch: such
// operations are garbage once analyzed, and making them anew for every trace was the analysis's
// largest allocation. make takes them when they are large enough (the result then owns them: one
// that holds its operations as values keeps them); give puts them back once nothing points to
// them (see Engine.run). They are cleared there, and only as far as they were used:
// newOperation fills an operation in place and relies on its zero fields.
type opsSpare struct {
	ops     []*analyzer.Operation
	slab    []analyzer.Operation
	att     []analyzer.Attempt
	calls   []spans.SpanID
	origins []string
}

// take carves b from the spare arrays when each has room for n calls, and empties the spare.
func (sp *opsSpare) take(b *opBufs, n int) ([]*analyzer.Operation, bool) {
	if cap(sp.ops) < n || cap(sp.slab) < n || cap(sp.att) < n || cap(sp.calls) < n || cap(sp.origins) < n {
		return nil, false
	}
	ops := b.carve(sp.ops[:n], sp.slab[:n], sp.att[:n], sp.calls[:n], sp.origins[:n])
	*sp = opsSpare{}
	return ops, true
}

// give keeps the arrays of b and ops (the list make returned, as inference left it) as the
// spare, cleared. The caller guarantees nothing points into them any more. Arrays beyond
// maxScratch elements are not kept.
func (sp *opsSpare) give(b *opBufs, ops []*analyzer.Operation) {
	if cap(b.slab) == 0 || cap(b.slab) > maxScratch || cap(ops) > maxScratch {
		return // nothing made, or too large to keep
	}
	clear(ops)
	clear(b.slab)
	clear(b.att)
	clear(b.origins)
	*sp = opsSpare{ops: ops[:0], slab: b.slab[:0], att: b.att[:0], calls: b.calls[:0], origins: b.origins[:0]}
	*b = opBufs{}
}

// carve makes the buffers empty slices of the given arrays, and returns the operations' list.
func (b *opBufs) carve(ops []*analyzer.Operation, slab []analyzer.Operation, att []analyzer.Attempt, calls []spans.SpanID, origins []string) []*analyzer.Operation {
	*b = opBufs{slab: slab[:0], att: att[:0], calls: calls[:0], origins: origins[:0]}
	return ops[:0]
}
