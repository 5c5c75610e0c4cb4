package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The analyzer holds every span it is given until --max-spans pushes it out: while its trace
// settles, then for re-analysis when late spans arrive and for the TUI's trace view. Held as
// []spans.Span, a span was about 730 bytes with its strings, and the garbage collector marked
// every string pointer of every attribute on every cycle (close to a fifth of the collector's
// CPU). So spans are packed the moment they arrive (pointer-free bytes the collector never looks
// into), and stay packed until the trace is dropped:
//
//   - Each trace's spans of a batch are one block - packed by the batch's producer where it
//     decoded them, or by ConsumeBatch (spans.Packing) - copied once, framed (a 4-byte length,
//     then the block), into a buffer of its own, exactly sized, or, where spans are released once
//     analyzed, into bytes carved from a slab shared with the traces filed beside it (see carve):
//     the first is the trace's pending bytes, the next three follow it in a short list, and any
//     later ones are appended to the last of those (see addPending).
//   - An analysis reads the blocks back into its scratch (spans.Unpacker: no allocation, strings
//     aliasing the packed bytes), and detaches what it keeps - operations, findings, notes - from
//     those bytes (see detachOps and detachRest), so that nothing held points into them but the trace itself.
//   - The analyzed spans are then held as one block: the one they came in, or, when they came
//     in several or the analysis dropped duplicates, the spans it kept packed again.
//   - The spans come back (a copy) only for the TUI's trace view.
//
// What the report and the windowed detectors read - operations, findings, accounting - is held
// beside the packed spans as the analysis made it.

// blockHeader is the framing before each block of a trace's packed bytes: its length.
const blockHeader = 4

// appendBlock appends ss to buf as one framed block, packed through scratch (reused).
func appendBlock(buf []byte, ss []spans.Span, scratch *[]byte) []byte {
	*scratch = spans.AppendPacked(append((*scratch)[:0], 0, 0, 0, 0), ss)
	binary.LittleEndian.PutUint32(*scratch, uint32(len(*scratch)-blockHeader))
	if buf == nil {
		// Most traces arrive in one batch: their bytes are exactly sized.
		return bytes.Clone(*scratch)
	}
	return append(buf, *scratch...)
}

// framed is a block packed already (by the batch's producer: spans.Batch.Pack) copied, framed,
// into a buffer of its own, or, with slab, into bytes carved from the Engine's slab (see carve).
func (a *Engine) framed(block []byte, slab bool) []byte {
	var b []byte
	if slab {
		b = a.carve(blockHeader + len(block))
	} else {
		b = make([]byte, blockHeader+len(block))
	}
	binary.LittleEndian.PutUint32(b, uint32(len(block)))
	copy(b[blockHeader:], block)
	if a.packed != nil {
		a.packed(b)
	}
	return b
}

// carve is n bytes carved from the front of what the Engine's slab has left, a new slab made when
// it has too few. The result's capacity ends where it does, so that appending to it (addPending)
// moves it to a buffer of its own instead of writing over the bytes carved after it.
//
// A slab lives as long as the last bytes carved from it, so only what is let go together is
// carved: the deliveries of traces filed in the same seconds, while their spans are released
// once analyzed (Config.ReleaseSpans: `stormwatch analyze`), and only for a trace's first
// --settle of pending spans (see slabFor). Against an allocation a delivery (a few kilobytes on
// realistic traffic, four deliveries a trace) that saves the allocator's work and its share of
// the garbage collector's: 3-7% of `analyze`'s CPU at a million spans (docs/performance.md).
//
// Each carved buffer is counted in its slab's record (slabRec), and let go of (letGo) once
// nothing reads it: its trace's analysis published, copied out (uncarve), or moved by an append
// (addPending). A slab none of whose buffers is held any more is carved again rather than left to
// the garbage collector: the copy into a fresh slab is the first touch of its pages (under
// `analyze`'s soft memory limit the runtime gives freed pages back to the system), and each slab
// one more allocation for the collector. Carved again, filing's copy is about 5% of `analyze`'s
// CPU at a million spans where fresh slabs made it 13% (docs/performance.md).
func (a *Engine) carve(n int) []byte {
	if len(a.slab)+slabTag+n > cap(a.slab) {
		a.nextSlab()
	}
	at := len(a.slab)
	a.slab = a.slab[:at+slabTag+n]
	binary.LittleEndian.PutUint32(a.slab[at:], uint32(a.slabID))
	a.slabRecs[a.slabID].refs++
	at += slabTag
	return a.slab[at : at+n : at+n]
}

// slabTag is the bytes before each carved buffer, outside it: the index of its slab's record in
// Engine.slabRecs.
const slabTag = 4

// slabRec is a slab whose buffers are held: refs of them.
type slabRec struct {
	buf  []byte
	refs int
}

// maxSpareSlabs bounds the slabs kept for carving again (Engine.spareSlabs): a pass lets go of a
// few slabs' buffers at a time, and the next batches carve as many.
const maxSpareSlabs = 16

// nextSlab makes the slab carve cuts from one with nothing carved yet: a spare one, or a new one.
// The slab it leaves is recycled if none of its buffers is held.
func (a *Engine) nextSlab() {
	if a.slab != nil && a.slabRecs[a.slabID].refs == 0 {
		a.recycleSlab(a.slabID)
	}
	var buf []byte
	if n := len(a.spareSlabs); n > 0 {
		buf, a.spareSlabs[n-1] = a.spareSlabs[n-1], nil
		a.spareSlabs = a.spareSlabs[:n-1]
	} else {
		buf = make([]byte, 0, slabSize)
	}
	if n := len(a.freeSlabRecs); n > 0 {
		a.slabID = a.freeSlabRecs[n-1]
		a.freeSlabRecs = a.freeSlabRecs[:n-1]
	} else {
		a.slabID = int32(len(a.slabRecs))
		a.slabRecs = append(a.slabRecs, slabRec{})
	}
	a.slabRecs[a.slabID] = slabRec{buf: buf}
	a.slab = buf
}

// recycleSlab frees record id, keeping its slab as a spare when there is room.
func (a *Engine) recycleSlab(id int32) {
	r := &a.slabRecs[id]
	if slabRecycled != nil {
		slabRecycled(r.buf[:cap(r.buf)])
	}
	if len(a.spareSlabs) < maxSpareSlabs {
		a.spareSlabs = append(a.spareSlabs, r.buf[:0])
	}
	*r = slabRec{}
	a.freeSlabRecs = append(a.freeSlabRecs, id)
}

// slabRecycled, when set (by a test), is given each slab as it is recycled: a test poisons it,
// so that a string anything kept still reads from a slab carved again shows in the report.
var slabRecycled func(slab []byte)

// letGo is told that carved buffer b is read no more: its analysis is published (its spans
// read back were left in a pooled scratch, and what the analysis keeps is detached from them, see
// detachOps), or it was copied or moved elsewhere. Once none of its slab's buffers is held, the
// slab is recycled, unless carve is still cutting from it.
func (a *Engine) letGo(b []byte) {
	tag := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -slabTag)), slabTag)
	id := int32(binary.LittleEndian.Uint32(tag))
	r := &a.slabRecs[id]
	if r.refs--; r.refs == 0 && id != a.slabID {
		a.recycleSlab(id)
	}
}

// letGoCarved lets go of the buffers among pending and later (a trace's, see addPending) that
// carved marks (traceState.carved).
func (a *Engine) letGoCarved(carved uint8, pending []byte, later [][]byte) {
	if carved&1 != 0 {
		a.letGo(pending)
	}
	for i, b := range later {
		if carved&(2<<i) != 0 {
			a.letGo(b)
		}
	}
}

// slabSize is the size of the slabs carve cuts from: a few dozen traces' deliveries. A delivery
// of more than maxCarved bytes gets a buffer of its own.
const (
	slabSize  = 64 << 10
	maxCarved = slabSize / 4
)

// slabFor reports whether t's delivery of n bytes, filed at now, is carved from the slab. It is
// while t is young: its first carved buffer filed less than --settle ago, when the traces filed
// beside it in the slab are still pending too. A trace pending longer than that (a consumer, a
// long job: a span every few seconds for minutes) would keep its slabs alive after everything
// else in them had gone, so its carved buffers are first copied into buffers of their own, and
// the rest of its deliveries get theirs. The decision is made before t.addPending, so that a
// delivery that will be appended to t's last buffer is not carved.
func (a *Engine) slabFor(t *traceState, n int, now int64) bool {
	if !a.cfg.ReleaseSpans || n > maxCarved {
		return false
	}
	if t.pending == nil {
		t.slabAt = now
		return true
	}
	if t.carved == 0 {
		return false
	}
	if now-t.slabAt > a.cfg.settle() {
		a.uncarve(t)
		return false
	}
	return len(t.later()) < laterRoom // t.more may be nil: later is then empty
}

// uncarve copies t's carved pending buffers into buffers of their own (see slabFor).
func (a *Engine) uncarve(t *traceState) {
	own := func(b []byte) []byte {
		c := bytes.Clone(b)
		if a.packed != nil {
			a.packed(c)
		}
		a.letGo(b)
		return c
	}
	if t.carved&1 != 0 {
		t.pending = own(t.pending)
	}
	for i, b := range t.later() {
		if t.carved&(2<<i) != 0 {
			t.more.blocks[i] = own(b)
		}
	}
	t.carved = 0
}

// packPending packs a trace's spans of one batch as one framed block of its own.
func (a *Engine) packPending(ss []spans.Span) []byte {
	b := appendBlock(nil, ss, &a.ingest)
	if a.packed != nil {
		a.packed(b)
	}
	if cap(a.ingest) > maxPackBuf {
		a.ingest = nil // one huge batch does not leave its buffer behind
	}
	return b
}

// addPending files b, framed blocks of spans not analyzed yet, after t's pending ones. Each of
// a trace's first four deliveries keeps the buffer it was copied into - the first in pending
// (most traces have only that), the next three in more. Appended into one buffer instead, a
// trace's bytes would be copied again into a larger one as deliveries arrived: in four batches,
// about twice over, leaving as much garbage (a tenth of `analyze`'s CPU on realistic traffic).
// Later deliveries - a trace trickling in, a span a batch - are appended to the last buffer, which
// grows as a slice does: the buffers an analysis reads stay at most five, so finding which of
// them a string points into (sources.owns, for every string the analysis keeps) costs a few
// compares, not one per delivery.
//
// carved says b was carved from the Engine's slab (see slabFor): t.carved notes which of its
// buffers were, so that they can be copied out. moved is a carved buffer that b was appended to,
// which is read no more (see Engine.letGo); nil when none.
func (t *traceState) addPending(b []byte, carved bool) (moved []byte) {
	var at uint8 // the bit of t.carved for b's buffer
	switch {
	case len(b) == 0:
	case t.pending == nil:
		t.pending = b
		at = 1
	case t.more == nil:
		m := &laterBlocks{}
		m.blocks = append(m.room[:0], b)
		t.more = m
		at = 2
	case len(t.more.blocks) < laterRoom:
		t.more.blocks = append(t.more.blocks, b)
		at = 1 << len(t.more.blocks)
	default:
		last := &t.more.blocks[len(t.more.blocks)-1]
		if bit := uint8(1) << len(t.more.blocks); t.carved&bit != 0 {
			moved = *last
			t.carved &^= bit
		}
		// A carved buffer ends at its capacity: the append moves it to a buffer of its own.
		*last = append(*last, b...)
	}
	if carved {
		t.carved |= at
	}
	return moved
}

// laterBlocks are a trace's pending buffers after the first, in arrival order: room for three in
// the same allocation, the third growing once a trace comes in more than four batches (see
// addPending). Behind a pointer, they cost a trace that came in one batch (most of a
// collector's) a word, not a slice.
type laterBlocks struct {
	blocks [][]byte
	room   [laterRoom][]byte
}

// laterRoom is how many buffers laterBlocks holds before the last grows: a trace's pending
// buffers are at most laterRoom+1, and t.carved has a bit for each.
const laterRoom = 3

// later is t's pending buffers after the first.
func (t *traceState) later() [][]byte {
	if t.more == nil {
		return nil
	}
	return t.more.blocks
}

// pendingBytes is the size of t's pending spans, packed.
func (t *traceState) pendingBytes() int {
	n := len(t.pending)
	for _, b := range t.later() {
		n += len(b)
	}
	return n
}

// eachBlock calls f with every framed block of b, and returns the first error: b is the
// analyzer's own, so an error is a bug, reported rather than hidden.
func eachBlock(b []byte, f func(block []byte) error) error {
	for len(b) > 0 {
		if len(b) < blockHeader {
			return fmt.Errorf("held spans: %d bytes left, too few for a block: %w", len(b), spans.ErrPackCorrupt)
		}
		n := int(binary.LittleEndian.Uint32(b))
		if n > len(b)-blockHeader {
			return fmt.Errorf("held spans: a block of %d bytes, %d left: %w", n, len(b)-blockHeader, spans.ErrPackCorrupt)
		}
		if err := f(b[blockHeader : blockHeader+n]); err != nil {
			return err
		}
		b = b[blockHeader+n:]
	}
	return nil
}

// sources are the packed bytes one analysis read its spans from, in order (framed blocks): the
// spans' strings alias them.
type sources [][]byte

// owns reports whether s's bytes are inside one of the sources: a string to detach.
func (src *sources) owns(s string) bool {
	if len(s) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	for _, b := range *src {
		if len(b) > 0 {
			base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			if p >= base && p < base+uintptr(len(b)) {
				return true
			}
		}
	}
	return false
}

// unpack reads the sources' spans into the scratch (valid until the scratch is reset). A source
// with a block that does not read is read up to that block, and the error returned.
func (sc *scratch) unpack(src sources) ([]spans.Span, error) {
	sc.unpacker.Reset()
	ss := sc.spans[:0]
	var lost error
	for _, b := range src {
		err := eachBlock(b, func(block []byte) error {
			var err error
			ss, err = sc.unpacker.Append(ss, block)
			return err
		})
		if err != nil && lost == nil {
			lost = err
		}
	}
	sc.spans = ss
	return ss, lost
}

// keepPacked is what a trace holds of the spans an analysis read from src (read of them; kept,
// the ones it kept): the block as it is when the spans came in one and the analysis dropped
// nothing; else the kept spans packed again as one block (detached results no longer point into
// src, so it may go). A trace whose spans came in several batches is packed again once analyzed:
// each block repeats its strings and header, about 200 bytes a block. scratch is the packing
// buffer, reused.
func keepPacked(src sources, kept []spans.Span, read int, lost error, scratch *[]byte) []byte {
	if len(kept) == 0 {
		return nil
	}
	if len(kept) == read && lost == nil {
		if b := src.only(); oneBlock(b) {
			return b
		}
	}
	return appendBlock(nil, kept, scratch)
}

// only is the one source that is not empty (nil when none is, or several are).
func (src sources) only() []byte {
	var one []byte
	for _, b := range src {
		if len(b) > 0 {
			if one != nil {
				return nil
			}
			one = b
		}
	}
	return one
}

// oneBlock reports whether b is exactly one framed block.
func oneBlock(b []byte) bool {
	return len(b) >= blockHeader && int(binary.LittleEndian.Uint32(b)) == len(b)-blockHeader
}

// heldTrace is what a held analysis keeps of its trace besides the packed spans: the data issues
// (the report's counts, taken back when late spans re-analyze the trace, and the trace view's
// notes, made from them when it is shown) and whether it was truncated. Most traces have none of
// it, and hold none (nil).
type heldTrace struct {
	issues    traceIssues
	truncated bool
}

// hold is a fresh analysis as held: operations, findings, accounting and detector errors, without
// the trace (spans and index), and what the trace had to say. The held result is a copy of its
// own: the analysis makes the result, its trace and its accounting rows in its scratch, which the
// next analysis reuses.
func hold(r *traceResult, p *opsPacker, packOps bool) (*traceResult, *heldTrace) {
	t := r.trace
	// One allocation for the result and what lives exactly as long as it (Engine.publish sets
	// them together, release drops them together): what the trace had to say, when it had
	// something, and its accounting rows (a row per dependency, caller and outcome: one to five
	// for most traces). More rows are a slice of their own.
	issues := t.issues != (traceIssues{}) || t.Truncated
	held, meta, acct := newHeld(len(r.acct), issues)
	if meta != nil {
		*meta = heldTrace{issues: t.issues, truncated: t.Truncated}
	}
	*held = *r
	held.trace = nil
	held.nOps = len(r.ops)
	// Of exactly their number, not the scratch's capacity: a trace keeps them as long as it is held.
	held.acct = append(acct[:0:len(acct)], r.acct...)
	if packOps {
		// Held packed (see heldops.go); the Operation values go with the trace, and their
		// memory to the next trace's (opsSpare): the held result keeps no slice of it, not even
		// an empty one.
		held.ops = nil
		if len(r.ops) > 0 {
			held.packedOps = p.pack(r.ops)
		}
	}
	return held, meta
}

// heldAlone and heldNoted are a held result allocated with its accounting rows (rows, an array
// of them) and, noted, what its trace had to say (see hold).
type heldAlone[A any] struct {
	r    traceResult
	rows A
}

type heldNoted[A any] struct {
	r    traceResult
	meta heldTrace
	rows A
}

// newHeld allocates a held result, with room for n accounting rows (none past maxHeldRows: the
// caller's append makes them) and, with issues, what its trace had to say.
func newHeld(n int, issues bool) (*traceResult, *heldTrace, []acctRow) {
	switch n {
	case 1:
		return allocHeld[[1]acctRow](n, issues)
	case 2:
		return allocHeld[[2]acctRow](n, issues)
	case 3:
		return allocHeld[[3]acctRow](n, issues)
	case 4:
		return allocHeld[[4]acctRow](n, issues)
	case 5:
		return allocHeld[[5]acctRow](n, issues)
	case maxHeldRows:
		return allocHeld[[maxHeldRows]acctRow](n, issues)
	}
	held, meta, _ := allocHeld[[0]acctRow](0, issues)
	return held, meta, nil
}

// maxHeldRows is the most accounting rows a held result is allocated with.
const maxHeldRows = 6

// allocHeld allocates a held result with A, an array of n accounting rows, in one allocation.
func allocHeld[A any](n int, issues bool) (*traceResult, *heldTrace, []acctRow) {
	if issues {
		h := new(heldNoted[A])
		return &h.r, &h.meta, rowsIn(&h.rows, n)
	}
	h := new(heldAlone[A])
	return &h.r, nil, rowsIn(&h.rows, n)
}

// rowsIn is the array of n accounting rows at a as a slice. With none there is no array to point
// into: the address of a zero-size last field is the end of its allocation, and converting it
// (checkptr, under -race) is a pointer past it.
func rowsIn[A any](a *A, n int) []acctRow {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*acctRow)(unsafe.Pointer(a)), n)
}

// dataIssues is the data issues a held analysis's trace had (none when m is nil: see hold).
func (m *heldTrace) dataIssues() traceIssues {
	if m == nil {
		return traceIssues{}
	}
	return m.issues
}

// unpackCopy reads a trace's held blocks back as spans of their own (copies: a view outlives
// any scratch).
func unpackCopy(packed []byte) ([]spans.Span, error) {
	var ss []spans.Span
	err := eachBlock(packed, func(block []byte) error {
		var err error
		ss, err = spans.AppendUnpacked(ss, block)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("unpacking held spans: %w", err)
	}
	return ss, nil
}

// viewPacked rebuilds the trace view of an analysis held packed: the spans unpacked and indexed
// again (they are the ones the analysis indexed, so the display order and depths come out the
// same), with the analysis's own operations, findings, truncation and notes.
func (a *Engine) viewPacked(id spans.TraceID, r *traceResult, meta *heldTrace, packed []byte) *TraceView {
	if meta == nil {
		meta = &heldTrace{}
	}
	ss, err := unpackCopy(packed)
	if err != nil {
		// Only a bug in the packed form gets here: show what is left, and say why.
		return &TraceView{TraceID: id, Operations: r.ops, Findings: r.findings, Truncated: meta.truncated,
			Notes: append(meta.issues.notes(), fmt.Sprintf("spans lost: %v", err))}
	}
	// The view reads the trace's index (order, depths), not its inference: the held result's
	// operations and findings are the analysis's own.
	t := &trace{}
	sc := a.intern.getScratch()
	defer a.intern.putScratch(sc) // after the view has copied what it shows out of the index
	buildTrace(t, id, ss, 0, sc)
	t.Truncated = meta.truncated
	t.issues = meta.issues // the view's notes are the analysis's, inference's counts included
	full := *r
	full.trace = t
	return full.view()
}

// detachOps and detachRest give what an analysis keeps strings of their own where they alias the
// packed bytes its spans were read from (src): operations held as values and the accounting rows
// (interned: services, names, dependencies and statuses repeat; operation ids are copied), then
// detector errors; findings are copies already (see Pass.Report).
// Operations held packed (see hold) need none of it - the frame is a copy of everything in
// them - and are passed as nil.
// Without it one operation's service name would keep its whole trace's packed bytes alive after
// the trace was dropped. Strings that do not alias src (constants, the interner's, text the
// analysis formatted) are left as they are.
func detachOps(ops []*analyzer.Operation, rows []acctRow, src *sources, in *interner) {
	if src == nil || len(ops) == 0 && len(rows) == 0 {
		return
	}
	in.lockStr()
	defer in.unlockStr()
	str := func(s *string) {
		if src.owns(*s) {
			*s = in.strLocked(*s)
		}
	}
	for _, op := range ops {
		if src.owns(op.ID) {
			op.ID = strings.Clone(op.ID) // one per operation: not worth a table entry
		}
		str(&op.Name)
		str(&op.Caller)
		str(&op.Owner)
		str(&op.Dependency)
		str(&op.DependencyService)
		str(&op.Terminal)
		str(&op.StopReason)
		for k := range op.Attempts {
			at := &op.Attempts[k]
			if src.owns(string(at.Kind)) {
				at.Kind = analyzer.AttemptKind(in.strLocked(string(at.Kind)))
			}
			for i := range at.Origins {
				str(&at.Origins[i])
			}
			str(&at.Outcome)
			str(&at.Status)
		}
	}
	for i := range rows {
		r := &rows[i]
		str(&r.dep)
		str(&r.origin)
		str(&r.service)
		str(&r.caller)
		str(&r.status)
	}
}

func detachRest(r *traceResult, src *sources) {
	if src == nil {
		return
	}
	for i := range r.errs {
		r.errs[i] = detachString(src, r.errs[i])
	}
}

func detachString(src *sources, s string) string {
	if src.owns(s) {
		return strings.Clone(s)
	}
	return s
}
