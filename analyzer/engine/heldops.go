package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/internal/packio"
	"github.com/stormwatch/stormwatch/spans"
)

// A held analysis of a live analyzer keeps its operations packed: one pointer-free byte string per
// trace, as its spans are. As Operation values they are most of what the garbage collector
// marks on every cycle in a collector under load (ten pointers an operation, four an attempt,
// for everything held), and the longer marking runs, the longer every pointer store in the
// process pays a write barrier. Packed, the collector never looks into them; they are read back
// when asked for, into the reader's memory: by a snapshot's reader (the TUI's operations list), by
// the windowed detectors, and by a trace view. See Config.holdsOperationsPacked for when they are
// held as values.
//
// Layout of one trace's operations (one frame; a result may hold several, one per fragment of a
// released trace, see publishLate): "uv" is an unsigned varint, "zz" a zigzag varint.
//
//	frame:     uv length of the rest, then uv operations, attempts, calls, origins, strings
//	           (the counts decoding allocates for), then the first operation's trace id (16,
//	           when there are operations), then the operations
//	operation: str ID, str Name, byte flags (1 Inferred, 2 a trace id other than the frame's
//	           follows, 4 a sample probability follows), [trace id (16)], [sample probability
//	           (8, float64 bits, little-endian)], span id (8), str Caller, str Owner, str Dependency,
//	           str DependencyService, str Terminal, str StopReason, zz deadline, zz start -
//	           the previous operation's start (0 before the first), zz end - start, uv parent
//	           (0 none, k+1 the k-th operation of the frame), uv Findings, intent (8),
//	           uv ChildCount, list attempts
//	attempt:   zz Number, str Kind, span id (8), list of calls (8 bytes each), list of origins
//	           (str each), zz start - its operation's start, zz end - start, str Outcome,
//	           str Status, zz backoff, zz RecordedNumber
//	list:      uv count+1, or 0 for a nil slice
//	str:       uv n: n even, an inline string of n/2 bytes (added to the frame's table unless
//	           empty); n odd, the (n-1)/2-th inline string of the table
//
// The operations of a frame are one trace's, begun close together, and their attempts are
// inside them: the trace id is written once, and times as differences, a few bytes each where
// absolute ones take nine. Frames are held for as long as their trace, so every byte counts.
//
// Strings repeat (a caller, a dependency, outcomes), and the repeats share their bytes: the
// interner's derived values, and the spans' strings, which alias one table per packed block. So
// the encoder finds repeats by the address of their bytes, without hashing or comparing them.

// errOpsCorrupt is wrapped by the errors of unpackOps: the bytes are not packed operations.
var errOpsCorrupt = errors.New("corrupt packed operations")

// opsPacker packs operations; it lives in a scratch and is reused from trace to trace.
type opsPacker struct {
	buf   []byte
	index map[*analyzer.Operation]int32 // operation -> its position in the frame, for Parent
	// strs finds strings already written by the address of their bytes: a direct-mapped cache.
	strs  [64]opsStrSlot
	nStrs uint32
	gen   uint32 // the frame being packed
}

type opsStrSlot struct {
	addr uintptr
	n    uint32
	idx  uint32 // table index + 1; 0 is an empty slot
	gen  uint32 // the frame that wrote it: slots of earlier frames are empty
}

// pack returns ops packed as one frame, in a slice of exactly its size.
func (p *opsPacker) pack(ops []*analyzer.Operation) []byte {
	if p.gen++; p.gen == 0 { // a new generation empties the string cache without clearing it
		p.strs, p.gen = [len(p.strs)]opsStrSlot{}, 1
	}
	if p.index == nil {
		p.index = make(map[*analyzer.Operation]int32, len(ops))
	} // empty: every pack clears it when done
	var nAtt, nCalls, nOrigins int
	for i, op := range ops {
		p.index[op] = int32(i)
		nAtt += len(op.Attempts)
		for k := range op.Attempts {
			nCalls += len(op.Attempts[k].Calls)
			nOrigins += len(op.Attempts[k].Origins)
		}
	}
	p.nStrs = 0
	b := p.buf[:0]
	var traceID spans.TraceID
	if len(ops) > 0 {
		traceID = ops[0].TraceID
	}
	var prevStart int64
	for i, op := range ops {
		b = p.str(b, op.ID)
		b = p.str(b, op.Name)
		var flags byte
		if op.Inferred {
			flags |= opInferred
		}
		if op.TraceID != traceID {
			flags |= opOwnTrace
		}
		if op.SampleProbability > 0 {
			flags |= opSampled
		}
		b = append(b, flags)
		if flags&opOwnTrace != 0 {
			b = append(b, op.TraceID[:]...)
		}
		if flags&opSampled != 0 {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(op.SampleProbability))
		}
		b = append(b, op.SpanID[:]...)
		b = p.str(b, op.Caller)
		b = p.str(b, op.Owner)
		b = p.str(b, op.Dependency)
		b = p.str(b, op.DependencyService)
		b = p.str(b, op.Terminal)
		b = p.str(b, op.StopReason)
		b = packio.AppendZZ(b, op.DeadlineUnixNano)
		b = packio.AppendZZ(b, op.StartUnixNano-prevStart)
		prevStart = op.StartUnixNano
		b = packio.AppendZZ(b, op.EndUnixNano-op.StartUnixNano)
		parent := uint64(0)
		if op.Parent != nil {
			k, ok := p.index[op.Parent]
			if !ok {
				// Inference links operations of one trace only; a parent elsewhere is a bug.
				panic(fmt.Sprintf("analyzer: operation %d of trace %s has a parent outside its trace", i, op.TraceID))
			}
			parent = uint64(k) + 1
		}
		b = binary.AppendUvarint(b, parent)
		b = binary.AppendUvarint(b, uint64(op.Findings))
		b = binary.LittleEndian.AppendUint64(b, op.IntentKey())
		b = binary.AppendUvarint(b, uint64(op.ChildCount()))
		b = packio.AppendCount(b, len(op.Attempts), op.Attempts == nil)
		for k := range op.Attempts {
			b = p.packAttempt(b, &op.Attempts[k], op.StartUnixNano)
		}
	}
	p.buf = b
	// Nothing of this trace stays reachable from the pooled scratch the packer lives in, and one
	// huge trace does not leave its buffers behind for the small ones after it.
	clear(p.index)
	if len(ops) > maxScratch {
		p.index = nil
	}
	if cap(p.buf) > 64*maxScratch {
		p.buf = nil
	}
	return frameOf([5]int{len(ops), nAtt, nCalls, nOrigins, int(p.nStrs)}, traceID, b)
}

// packAttempt appends attempt at of an operation that started at opStart.
func (p *opsPacker) packAttempt(b []byte, at *analyzer.Attempt, opStart int64) []byte {
	b = packio.AppendZZ(b, int64(at.Number))
	b = p.str(b, string(at.Kind))
	b = append(b, at.SpanID[:]...)
	b = packio.AppendCount(b, len(at.Calls), at.Calls == nil)
	for _, c := range at.Calls {
		b = append(b, c[:]...)
	}
	b = packio.AppendCount(b, len(at.Origins), at.Origins == nil)
	for _, o := range at.Origins {
		b = p.str(b, o)
	}
	b = packio.AppendZZ(b, at.StartUnixNano-opStart)
	b = packio.AppendZZ(b, at.EndUnixNano-at.StartUnixNano)
	b = p.str(b, at.Outcome)
	b = p.str(b, at.Status)
	b = packio.AppendZZ(b, at.BackoffNanos)
	b = packio.AppendZZ(b, at.RecordedNumber())
	return b
}

// frameOf is the frame of packed operations body, whose counts are n (operations, attempts,
// calls, origins, strings) and trace traceID (when there are operations): its size, its head
// and body, in a slice of exactly its size.
func frameOf(n [5]int, traceID spans.TraceID, body []byte) []byte {
	var head [5*binary.MaxVarintLen64 + len(traceID)]byte
	h := head[:0]
	for _, v := range n {
		h = binary.AppendUvarint(h, uint64(v))
	}
	if n[0] > 0 {
		h = append(h, traceID[:]...)
	}
	var sizeBuf [binary.MaxVarintLen64]byte
	size := sizeBuf[:binary.PutUvarint(sizeBuf[:], uint64(len(h)+len(body)))]
	out := make([]byte, 0, len(size)+len(h)+len(body))
	out = append(out, size...)
	out = append(out, h...)
	return append(out, body...)
}

// The flags byte of a packed operation.
const (
	opInferred = 1 << iota // Operation.Inferred
	opOwnTrace             // its trace id follows: not the frame's
	opSampled              // its sample probability follows
)

func (p *opsPacker) str(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	addr := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	slot := &p.strs[(addr>>3^addr>>9)%uintptr(len(p.strs))]
	if slot.gen == p.gen && slot.idx != 0 && slot.addr == addr && slot.n == uint32(len(s)) {
		return binary.AppendUvarint(b, uint64(slot.idx-1)<<1|1)
	}
	p.nStrs++
	*slot = opsStrSlot{addr: addr, n: uint32(len(s)), idx: p.nStrs, gen: p.gen}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	return append(b, s...)
}

// unpackOps appends the operations packed in b (frames) to dst. Their strings alias b, which
// must not change (held results never change theirs).
func unpackOps(dst []*analyzer.Operation, b []byte) ([]*analyzer.Operation, error) {
	var ar opsArena
	ar.reserve(b)
	return ar.unpack(dst, b)
}

// opsArena is the memory operations are read back into: one array per kind for every frame
// reserved, so reading back the operations of thousands of traces (a windowed run) is a few
// allocations, not five a trace.
type opsArena struct {
	slab    []analyzer.Operation
	att     []analyzer.Attempt
	calls   []spans.SpanID
	origins []string
	// Read while a frame is read: its string table and its operations' parents.
	strs    []packio.StrRef
	parents []int32
}

// reserve makes room for the operations packed in the frames of bs (added to what is reserved
// and not used yet). Frames it cannot read are left for unpack to report.
func (ar *opsArena) reserve(bs ...[]byte) {
	var total [5]int
	for _, b := range bs {
		countOps(&total, b)
	}
	ar.grow(total)
}

// countOps adds the counts of the operations packed in b's frames to total.
func countOps(total *[5]int, b []byte) {
	_ = eachOpsFrame(b, func(n [5]int, _ string) error {
		for i := range total {
			total[i] += n[i]
		}
		return nil
	})
}

// grow makes room in ar for total (counts as the frames give them).
func (ar *opsArena) grow(total [5]int) {
	ar.slab = slices.Grow(ar.slab, total[0])
	ar.att = slices.Grow(ar.att, total[1])
	ar.calls = slices.Grow(ar.calls, total[2])
	ar.origins = slices.Grow(ar.origins, total[3])
}

// unpack appends the operations packed in b (frames) to dst.
func (ar *opsArena) unpack(dst []*analyzer.Operation, b []byte) ([]*analyzer.Operation, error) {
	err := eachOpsFrame(b, func(n [5]int, frame string) error {
		r := opsReader{packio.Reader{S: frame, Corrupt: errOpsCorrupt}}
		var err error
		dst, err = r.frame(dst, n, ar)
		return err
	})
	return dst, err
}

// eachOpsFrame calls f with the counts and the rest of every frame of b, up to the first error.
func eachOpsFrame(b []byte, f func(n [5]int, frame string) error) error {
	for len(b) > 0 {
		r := opsReader{packio.Reader{S: unsafe.String(unsafe.SliceData(b), len(b)), Corrupt: errOpsCorrupt}}
		size := r.UV()
		if r.Err != nil || size > uint64(len(b)-r.Off) {
			return fmt.Errorf("packed operations: a frame of %d bytes, %d left: %w", size, len(b)-r.Off, errOpsCorrupt)
		}
		end := r.Off + int(size)
		r.S = r.S[:end]
		var n [5]int
		for i := range n {
			v := r.UV()
			// Every element takes at least opsMinSize[i] bytes: a count beyond what the frame
			// holds is corrupt, and this bounds what is allocated for it.
			if v > uint64(len(r.S)-r.Off)/opsMinSize[i] {
				r.Fail("count %d", v)
			}
			n[i] = int(v)
		}
		if r.Err != nil {
			return r.Err
		}
		if err := f(n, r.S[r.Off:]); err != nil {
			return err
		}
		b = b[end:]
	}
	return nil
}

// opsMinSize is the fewest bytes an operation, an attempt, a call, an origin and a table string
// take packed (see the layout above).
var opsMinSize = [5]uint64{
	1 + 1 + 1 + 8 + 4*1 + 2*1 + 3*1 + 1 + 1 + 8 + 1 + 1,
	1 + 1 + 8 + 1 + 1 + 2*1 + 2*1 + 2*1,
	8,
	1,
	2,
}

// take carves n elements off the front of *free, or makes them when it holds fewer.
func take[T any](free *[]T, n int) []T {
	if cap(*free)-len(*free) < n {
		return make([]T, n)
	}
	s := (*free)[len(*free) : len(*free)+n : len(*free)+n]
	*free = (*free)[:len(*free)+n]
	return s
}

// carveList reads a list's count and carves the list off the front of *free, what the frame's
// header counted: nil when packed nil, empty (not nil) when packed empty, even where *free is nil
// (no element of the kind in the frame). A count beyond what is left fails the frame.
func carveList[T any](r *opsReader, free *[]T, what string) []T {
	c, ok := r.Count()
	switch {
	case !ok:
		return nil
	case c > len(*free):
		r.Fail("%d %s, %d left", c, what, len(*free))
		return nil
	case c == 0:
		return []T{}
	}
	s := (*free)[:c:c]
	*free = (*free)[c:]
	return s
}

// opsReader reads one frame (see packio.Reader).
type opsReader struct{ packio.Reader }

// frame reads the operations of a frame whose counts are n into ar's memory.
func (r *opsReader) frame(dst []*analyzer.Operation, n [5]int, ar *opsArena) ([]*analyzer.Operation, error) {
	nOps, nAtt, nCalls, nOrigins, nStrs := n[0], n[1], n[2], n[3], n[4]
	slab := take(&ar.slab, nOps)
	att := take(&ar.att, nAtt)
	calls := take(&ar.calls, nCalls)
	origins := take(&ar.origins, nOrigins)
	r.Strs, r.NStrs = slices.Grow(ar.strs[:0], nStrs), nStrs
	parents := slices.Grow(ar.parents[:0], nOps)[:nOps]
	defer func() { ar.strs, ar.parents = r.Strs[:0], parents[:0] }()
	var traceID spans.TraceID
	if nOps > 0 {
		copy(traceID[:], r.Fixed(len(traceID)))
	}
	var prevStart int64
	for i := range slab {
		op := &slab[i]
		op.ID = r.Str()
		op.Name = r.Str()
		flags := r.Byte()
		if flags&^(opInferred|opOwnTrace|opSampled) != 0 {
			r.Fail("operation %d: flags %#x", i, flags)
		}
		op.Inferred = flags&opInferred != 0
		if op.TraceID = traceID; flags&opOwnTrace != 0 {
			copy(op.TraceID[:], r.Fixed(16))
		}
		if flags&opSampled != 0 {
			if f := r.Fixed(8); len(f) == 8 {
				op.SampleProbability = math.Float64frombits(binary.LittleEndian.Uint64([]byte(f)))
			}
		}
		copy(op.SpanID[:], r.Fixed(8))
		op.Caller = r.Str()
		op.Owner = r.Str()
		op.Dependency = r.Str()
		op.DependencyService = r.Str()
		op.Terminal = r.Str()
		op.StopReason = r.Str()
		op.DeadlineUnixNano = r.ZZ()
		op.StartUnixNano = prevStart + r.ZZ()
		prevStart = op.StartUnixNano
		op.EndUnixNano = op.StartUnixNano + r.ZZ()
		// Parents are linked once every operation of the frame is read: one may come after
		// the operations inside it.
		if k := r.UV(); k > uint64(nOps) {
			r.Fail("operation %d: parent %d of %d", i, k-1, nOps)
		} else {
			parents[i] = int32(k) - 1
		}
		op.Findings = int(r.UV())
		if f := r.Fixed(8); len(f) == 8 {
			setIntentKey(op, uint64(f[0])|uint64(f[1])<<8|uint64(f[2])<<16|uint64(f[3])<<24|
				uint64(f[4])<<32|uint64(f[5])<<40|uint64(f[6])<<48|uint64(f[7])<<56)
		}
		setChildCount(op, int(r.UV()))
		op.Attempts = carveList(r, &att, "attempts")
		for k := range op.Attempts {
			r.attempt(&op.Attempts[k], op.StartUnixNano, &calls, &origins)
		}
		if r.Err != nil {
			return dst, r.Err
		}
	}
	if r.Off != len(r.S) || len(att) != 0 || len(calls) != 0 || len(origins) != 0 || len(r.Strs) != nStrs {
		r.Fail("the frame's counts do not match its operations")
		return dst, r.Err
	}
	if !r.parentsEnd(parents) {
		return dst, r.Err
	}
	// Only a frame read whole is handed out, its parents linked.
	for i, k := range parents {
		if k >= 0 {
			slab[i].Parent = &slab[k]
		}
	}
	for i := range slab {
		dst = append(dst, &slab[i])
	}
	return dst, nil
}

// attempt reads attempt at of an operation that started at opStart, its calls and origins carved
// from the frame's.
func (r *opsReader) attempt(at *analyzer.Attempt, opStart int64, calls *[]spans.SpanID, origins *[]string) {
	at.Number = int(r.ZZ())
	at.Kind = analyzer.AttemptKind(r.Str())
	copy(at.SpanID[:], r.Fixed(8))
	at.Calls = carveList(r, calls, "calls")
	for j := range at.Calls {
		copy(at.Calls[j][:], r.Fixed(8))
	}
	at.Origins = carveList(r, origins, "origins")
	for j := range at.Origins {
		at.Origins[j] = r.Str()
	}
	at.StartUnixNano = opStart + r.ZZ()
	at.EndUnixNano = at.StartUnixNano + r.ZZ()
	at.Outcome = r.Str()
	at.Status = r.Str()
	at.BackoffNanos = r.ZZ()
	setRecordedNumber(at, r.ZZ())
}

// parentsEnd reports whether every chain of parents ends: walking one never takes more steps
// than there are operations. (Inference lists a parent before the operations inside it; the form
// does not rely on it.) It fails r when one does not.
func (r *opsReader) parentsEnd(parents []int32) bool {
	for i := range parents {
		steps := 0
		for k := parents[i]; k >= 0; k = parents[k] {
			if steps++; steps > len(parents) {
				r.Fail("operation %d: its parents make a cycle", i)
				return false
			}
		}
	}
	return true
}
