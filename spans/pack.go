package spans

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/stormwatch/stormwatch/internal/packio"
)

// The packed form stores one trace's spans (or a batch's share of them) while the analyzer holds
// them: until the trace settles, then for the TUI's trace view and for late spans that make the
// analyzer analyze the trace again. Held
// as []Span, a span is a 184-byte struct plus 48 bytes per attribute, full of string pointers that
// the garbage collector marks on every cycle; packed, it is a pointer-free byte string of about a
// hundred bytes that the collector never looks into.
//
// Layout (all integers little endian; "uv" is an unsigned varint, "zz" a zigzag varint):
//
//	block:    header, the spans, then the resources they name: a packer that is given spans
//	          one at a time (Packing.PackFrom) learns the resources as it goes
//	header:   version byte, then six uint32: spans, resources, attributes (all of them: span,
//	          resource, link and event attributes), links, events, strings (inline strings);
//	          then the trace id of the first span (16 bytes, zero when there are no spans)
//	resource: str service.name, str service.instance.id, attrs
//	span:     flags byte (1 trace id differs from the header's: 16 bytes follow; 2 has a parent:
//	          8 bytes follow), span id (8), [trace id], [parent id], zz start - previous span's
//	          start, zz end - start, kind byte, status byte, str name, str status message,
//	          str scope, uv resource (0 none, k+1 the k-th resource), attrs, links, events
//	link:     trace id (16), span id (8), attrs
//	event:    zz time - span start, str name, attrs
//	attrs, links, events: uv count+1, or 0 for a nil slice (so nil and empty survive the trip)
//	attr:     key byte (k > 0: the well-known key k-1, see packKeys; 0: str key follows), tag
//	          byte (0x80 Str follows, 0x40 Num follows, the low six bits the value type, or 63 and
//	          a byte with the type), [str], [Num: 8 bytes for ValueDouble, zz else]
//	str:      uv n: n even, an inline string of n/2 bytes (added to the table unless empty);
//	          n odd, the (n-1)/2-th inline string of the table
//
// Strings repeat within a trace (attribute keys, service names, methods, operation ids): the packer
// writes each once and refers back to it after. It finds repeats through a small direct-mapped
// cache keyed by a few words of the text (see strHash); a string it misses is only written again.

// packVersion is the first byte of every packed trace. The form lives in memory only, so a
// version is never read back by another build.
const packVersion = 3

// packKeys are the keys an attribute's key byte names (a copy of WellKnown as the process
// started: the form must not change under a caller that edits the exported list). Decoders
// intern these keys, so most attributes' keys are one of them and take one byte, found by the
// string's address alone (keyCodes): no hashing, no table of the trace's strings.
var packKeys = slices.Clone(WellKnown)

// keyCodes finds a key's byte (its index in packKeys + 1) by the address and length of the key's
// bytes: open addressing over the canonical strings' addresses, built once and only read. A key
// equal to a well-known one but made elsewhere is not found and is written as a string: the
// same text, one byte more.
var keyCodes = func() *[keyCodesSize]keyCode {
	var t [keyCodesSize]keyCode
	for i, k := range packKeys {
		addr := uintptr(unsafe.Pointer(unsafe.StringData(k)))
		for j := keySlot(addr); ; j = (j + 1) & (keyCodesSize - 1) {
			if t[j].code == 0 {
				t[j] = keyCode{addr: addr, n: uint32(len(k)), code: uint8(i + 1)}
				break
			}
		}
	}
	return &t
}()

// keyCodesSize is a power of two, several times len(WellKnown), which fits in a key byte.
const keyCodesSize = 256

type keyCode struct {
	addr uintptr
	n    uint32
	code uint8
}

func keySlot(addr uintptr) uintptr { return (addr>>3 ^ addr>>11) & (keyCodesSize - 1) }

// KeyIndex is the index of key in [WellKnown] (as the process started) when key is that list's own
// string, as the decoders and the unpacked spans give it, found by its address alone; -1 for any
// other string, even an equal one. It lets a reader of many attributes number the keys it knows
// without comparing their bytes.
func KeyIndex(key string) int { return int(keyCodeOf(key)) - 1 }

// keyCodeOf is key's byte, or 0 when it is not a canonical well-known key.
func keyCodeOf(key string) byte {
	addr := uintptr(unsafe.Pointer(unsafe.StringData(key)))
	t := keyCodes
	for j := keySlot(addr); ; j = (j + 1) & (keyCodesSize - 1) {
		e := &t[j]
		if e.code == 0 {
			return 0
		}
		if e.addr == addr && e.n == uint32(len(key)) {
			return e.code
		}
	}
}

const (
	packHeaderLen = 1 + 6*4 + 16
	// Each element takes at least this many bytes, which bounds what a header may claim.
	packMinSpan     = 1 + 8 + 1 + 1 + 1 + 1 + 3 + 1 + 3
	packMinResource = 3 + 1
	packMinAttr     = 2
	packMinLink     = 16 + 8 + 1
	packMinEvent    = 3
	packMinString   = 2
)

const (
	packTraceID   = 1
	packHasParent = 2

	tagStr     = 0x80
	tagNum     = 0x40
	tagType    = 0x3f
	tagTypeEsc = 0x3f
)

// ErrPackCorrupt is wrapped by the errors of [AppendUnpacked]: the bytes are not a packed trace.
var ErrPackCorrupt = errors.New("corrupt packed spans")

// AppendPacked appends ss in packed form to dst and returns the extended buffer. Every field of
// every span is kept; spans that share a resource (by pointer or by value) share it packed too.
func AppendPacked(dst []byte, ss []Span) []byte {
	p := packers.Get().(*packer)
	p.pack(dst, ss, nil)
	b := p.buf
	p.forget()
	packers.Put(p)
	return b
}

// packers keeps packers for AppendPacked: a packer used again starts a block by counting one up
// (see packer.gen), a new one is 7 KiB to clear.
var packers = sync.Pool{New: func() any { return new(packer) }}

// PackedLen is the number of spans in a packed trace, read from its header.
func PackedLen(b []byte) (int, error) {
	if len(b) < packHeaderLen || b[0] != packVersion {
		return 0, fmt.Errorf("packed spans header: %w", ErrPackCorrupt)
	}
	return int(binary.LittleEndian.Uint32(b[1:])), nil
}

// UnpackSpans rebuilds the spans of a packed trace (see [AppendUnpacked]).
func UnpackSpans(b []byte) ([]Span, error) { return AppendUnpacked(nil, b) }

// AppendUnpacked rebuilds the spans packed in b and appends them to dst. The spans' strings share
// one copy of b (b may be reused afterwards), and their attributes, links, events and resources
// share one array each: a handful of allocations per trace, none per span or string. Bad input
// returns an error wrapping [ErrPackCorrupt] and dst unchanged; the allocations are bounded by
// len(b), whatever the header claims.
func AppendUnpacked(dst []Span, b []byte) ([]Span, error) {
	return unpackInto(dst, b, string(b), nil)
}

// Unpacker unpacks packed traces again and again without allocating: the spans it makes alias
// the packed bytes for their strings and its own buffers for their attributes, links, events and
// resources. It is for a reader that uses the spans briefly and keeps none of them, such as one
// analysis after another. The zero value is ready to use; it is not safe for concurrent use.
type Unpacker struct {
	attrs  []Attr
	links  []Link
	events []Event
	res    []Resource
	strs   []packio.StrRef
}

// Append appends the spans packed in b to dst, as [AppendUnpacked] does, except that:
//   - their strings alias b, which must not change while they are in use (a string kept longer
//     keeps all of b from being freed);
//   - their attributes, links, events and resources live in u's buffers, valid until u's next
//     Reset: several packed traces can be appended one after another and used together.
func (u *Unpacker) Append(dst []Span, b []byte) ([]Span, error) {
	return unpackInto(dst, b, unsafe.String(unsafe.SliceData(b), len(b)), u)
}

// maxUnpackerKeep is the largest buffer (in elements) Reset keeps: one huge trace does not leave
// its arrays behind for the small ones after it.
const maxUnpackerKeep = 1 << 14

// Reset makes u's buffers free for the next spans; the spans appended since the last Reset must
// not be used after it.
func (u *Unpacker) Reset() {
	u.attrs = keep(u.attrs)
	u.links = keep(u.links)
	u.events = keep(u.events)
	u.res = keep(u.res)
	u.strs = keep(u.strs)
}

func keep[T any](s []T) []T {
	if cap(s) > maxUnpackerKeep {
		return nil
	}
	return s[:0]
}

// carve returns n elements at the end of *buf, growing it (into a new array, which leaves the
// elements carved before where they were) when there is no room. The elements hold what an
// earlier use left: the unpacker assigns every field.
func carve[T any](buf *[]T, n int) []T {
	b := *buf
	if cap(b)-len(b) < n {
		b = make([]T, 0, max(n, 2*cap(b)))
	}
	at := len(b)
	b = b[:at+n]
	*buf = b
	return b[at : at+n : at+n]
}

// unpackInto reads b (whose text s is, as a copy or aliasing it) into dst. With bufs nil the
// arrays are allocated for this trace alone.
func unpackInto(dst []Span, b []byte, s string, bufs *Unpacker) ([]Span, error) {
	if len(b) < packHeaderLen || b[0] != packVersion {
		return dst, fmt.Errorf("packed spans header: %w", ErrPackCorrupt)
	}
	if uint64(len(b)) > math.MaxUint32 {
		// The string table holds 32-bit offsets; no packer writes a block this large.
		return dst, fmt.Errorf("packed spans of %d bytes: more than a block holds: %w", len(b), ErrPackCorrupt)
	}
	var n [6]int
	for i := range n {
		n[i] = int(binary.LittleEndian.Uint32(b[1+4*i:]))
	}
	nSpans, nRes, nAttrs, nLinks, nEvents, nStrs := n[0], n[1], n[2], n[3], n[4], n[5]
	body := len(b) - packHeaderLen
	if nSpans*packMinSpan > body || nRes*packMinResource > body || nAttrs*packMinAttr > body ||
		nLinks*packMinLink > body || nEvents*packMinEvent > body || nStrs*packMinString > body {
		return dst, fmt.Errorf("packed spans header claims more than its %d bytes hold: %w", len(b), ErrPackCorrupt)
	}
	u := unpacker{Reader: packio.Reader{S: s, Off: packHeaderLen, Corrupt: ErrPackCorrupt, NStrs: nStrs}}
	var res []Resource
	if bufs == nil {
		u.Strs = make([]packio.StrRef, 0, nStrs)
		if nAttrs > 0 {
			u.attrs = make([]Attr, nAttrs)
		}
		if nLinks > 0 {
			u.links = make([]Link, nLinks)
		}
		if nEvents > 0 {
			u.events = make([]Event, nEvents)
		}
		if nRes > 0 {
			res = make([]Resource, nRes)
		}
	} else {
		// The string table is the block's own; the arrays are carved from the buffers.
		u.Strs = carve(&bufs.strs, nStrs)[:0]
		u.attrs = carve(&bufs.attrs, nAttrs)
		u.links = carve(&bufs.links, nLinks)
		u.events = carve(&bufs.events, nEvents)
		res = carve(&bufs.res, nRes)
	}
	var tid TraceID
	copy(tid[:], u.S[1+6*4:packHeaderLen])
	out := slices.Grow(dst, nSpans)
	var prevStart int64
	for i := range nSpans {
		var s Span
		flags := u.Byte()
		copy(s.SpanID[:], u.Fixed(8))
		s.TraceID = tid
		if flags&packTraceID != 0 {
			copy(s.TraceID[:], u.Fixed(16))
		}
		if flags&packHasParent != 0 {
			copy(s.ParentID[:], u.Fixed(8))
		}
		if flags&^(packTraceID|packHasParent) != 0 {
			u.Fail("unknown span flags %#x", flags)
		}
		s.StartUnixNano = prevStart + u.ZZ()
		prevStart = s.StartUnixNano
		s.EndUnixNano = s.StartUnixNano + u.ZZ()
		s.Kind = Kind(u.Byte())
		s.Status = StatusCode(u.Byte())
		s.Name = u.Str()
		s.StatusMessage = u.Str()
		s.Scope = u.Str()
		if k := u.UV(); k > 0 {
			if k > uint64(len(res)) {
				u.Fail("resource %d of %d", k-1, len(res))
			} else {
				s.Resource = &res[k-1]
			}
		}
		s.Attrs = u.attrList()
		if c, ok := u.Count(); ok && u.Err == nil {
			if c > len(u.links) {
				u.Fail("%d links, %d left of the header's", c, len(u.links))
			} else if c == 0 {
				s.Links = []Link{}
			} else {
				s.Links = u.links[:c:c]
				u.links = u.links[c:]
				for k := range s.Links {
					l := &s.Links[k]
					copy(l.TraceID[:], u.Fixed(16))
					copy(l.SpanID[:], u.Fixed(8))
					l.Attrs = u.attrList()
				}
			}
		}
		if c, ok := u.Count(); ok && u.Err == nil {
			if c > len(u.events) {
				u.Fail("%d events, %d left of the header's", c, len(u.events))
			} else if c == 0 {
				s.Events = []Event{}
			} else {
				s.Events = u.events[:c:c]
				u.events = u.events[c:]
				for k := range s.Events {
					e := &s.Events[k]
					e.TimeUnixNano = s.StartUnixNano + u.ZZ()
					e.Name = u.Str()
					e.Attrs = u.attrList()
				}
			}
		}
		if u.Err != nil {
			return dst, fmt.Errorf("unpacking span %d of %d: %w", i, nSpans, u.Err)
		}
		out = append(out, s)
	}
	// The resources come after the spans that point to them (see the layout).
	for i := range res {
		res[i] = Resource{ServiceName: u.Str(), ServiceInstance: u.Str(), Attrs: u.attrList()}
		if u.Err != nil {
			return dst, fmt.Errorf("unpacking resource %d: %w", i, u.Err)
		}
	}
	switch {
	case u.Off != len(u.S):
		u.Fail("%d bytes after the last span", len(u.S)-u.Off)
	case len(u.attrs) != 0 || len(u.links) != 0 || len(u.events) != 0 || len(u.Strs) != nStrs:
		u.Fail("the header's counts do not match the spans")
	}
	if u.Err != nil {
		return dst, fmt.Errorf("unpacking spans: %w", u.Err)
	}
	return out, nil
}

// packer writes one packed trace, span by span (begin, span, end).
type packer struct {
	buf []byte
	// at is where the block begins in buf; tid the trace id in its header (the first span's);
	// n the spans packed, prevStart the last one's start; the other counts the header's.
	at                      int
	tid                     TraceID
	n                       int
	prevStart               int64
	nAttrs, nLinks, nEvents int
	facts                   spanFacts
	// cache maps a string to its index in the table, for back references: two-way sets; a
	// string pushed out is only written inline again.
	cache [128][2]strSlot
	// byAddr finds a string written before by the address and length of its bytes alone, without
	// hashing them: attribute keys are the interned, canonical strings, the same bytes on every
	// span, and are half the strings packed. Direct-mapped; a miss goes on to cache.
	byAddr [64]addrSlot
	nStrs  uint32
	// gen is the block being written: a slot of either cache written for another block (its gen
	// differs) is empty. Starting a block so costs a counter, not clearing the caches' 7 KiB -
	// which, for the few spans a trace has in one batch, cost more than packing them.
	gen uint32
	// The distinct resources in packed order: the first few in an array of the packer's own (one
	// allocation per trace fewer), the rest in more, indexed by resAt past the first few.
	res0  [8]*Resource
	more  []*Resource
	nRes  int
	resAt map[*Resource]int
	// byContent finds, past the first few, the resources equal in content to a new pointer by
	// a hash of their content: comparing it with every resource before it would cost the square
	// in a trace whose spans each came with a resource of their own.
	byContent map[uint64][]int32
	seed      maphash.Seed
	last      *Resource
	lastK     int
}

// addrSlot is a string of the table by the address of its bytes (a number, compared only while
// the strings packed are alive): its length and table index + 1 (0 is an empty slot).
type addrSlot struct {
	addr        uintptr
	n, idx, gen uint32
}

// strSlot is a string written inline: where in buf, how long, its table index + 1 (0 is an empty
// slot), and the address of the string it was written from. No pointer (the address is a number,
// compared only while the strings packed are alive), so filling the cache costs no write barrier
// while the garbage collector runs.
type strSlot struct {
	addr             uintptr
	off, n, idx, gen uint32
}

// spanAt is the k-th span to pack: ss[k], or ss[idx[k]] when the packer is given an order.
func spanAt(ss []Span, idx []int32, k int) *Span {
	if idx == nil {
		return &ss[k]
	}
	return &ss[idx[k]]
}

// pack writes one block at the end of dst of ss's spans, or of the spans idx names, in idx's
// order (nil: all of them, in order). It returns what the analyzer checks of each span as it
// files it (see PackedTrace), gathered as the spans are packed.
func (p *packer) pack(dst []byte, ss []Span, idx []int32) spanFacts {
	n := len(ss)
	if idx != nil {
		n = len(idx)
	}
	p.begin(dst)
	for i := range n {
		p.span(spanAt(ss, idx, i))
	}
	p.end()
	return p.facts
}

// begin starts a block at the end of dst, forgetting everything of the block before.
func (p *packer) begin(dst []byte) {
	gen := p.gen + 1
	if gen == 0 {
		// The counter went round: slots of a block four billion blocks ago would look current.
		p.cache, p.byAddr = [128][2]strSlot{}, [64]addrSlot{}
		gen = 1
	}
	p.gen = gen
	p.at, p.tid, p.n, p.prevStart = len(dst), TraceID{}, 0, 0
	p.nAttrs, p.nLinks, p.nEvents, p.facts, p.nStrs = 0, 0, 0, spanFacts{}, 0
	p.res0, p.more, p.nRes, p.resAt, p.byContent, p.last, p.lastK = [8]*Resource{}, p.more[:0], 0, nil, nil, nil, 0
	dst = append(dst, packVersion)
	p.buf = append(dst, make([]byte, 6*4+16)...) // the counts and the trace id, filled in later
}

// span packs s.
func (p *packer) span(s *Span) {
	// The buffer is a local while it grows: stored back through p on every append it would cost
	// a write barrier each time while the garbage collector marks, which it often does in a
	// collector under load.
	b := p.head(p.buf, s)
	b = p.attrs(b, s.Attrs)
	b = packio.AppendCount(b, len(s.Links), s.Links == nil)
	p.nLinks += len(s.Links)
	for k := range s.Links {
		l := &s.Links[k]
		b = append(b, l.TraceID[:]...)
		b = append(b, l.SpanID[:]...)
		b = p.attrs(b, l.Attrs)
	}
	b = packio.AppendCount(b, len(s.Events), s.Events == nil)
	p.nEvents += len(s.Events)
	for k := range s.Events {
		e := &s.Events[k]
		b = packio.AppendZZ(b, e.TimeUnixNano-s.StartUnixNano)
		b = p.str(b, e.Name)
		b = p.attrs(b, e.Attrs)
	}
	p.facts.add(s.StartUnixNano, s.EndUnixNano, s.Kind == KindConsumer && len(s.Links) == 1 && s.ParentID.IsZero())
	p.buf = b
}

// head writes span s up to its attributes: its ids, times, kind, status, name, status message,
// scope and resource. It counts the span, not its facts (its links are not written yet).
func (p *packer) head(b []byte, s *Span) []byte {
	if p.n == 0 {
		p.tid = s.TraceID
		copy(b[p.at+1+6*4:], s.TraceID[:])
	}
	p.n++
	var flags byte
	if s.TraceID != p.tid {
		flags |= packTraceID
	}
	if !s.ParentID.IsZero() {
		flags |= packHasParent
	}
	b = append(b, flags)
	b = append(b, s.SpanID[:]...)
	if flags&packTraceID != 0 {
		b = append(b, s.TraceID[:]...)
	}
	if flags&packHasParent != 0 {
		b = append(b, s.ParentID[:]...)
	}
	// Differences wrap around like the sums that undo them, so any pair of times survives.
	b = packio.AppendZZ(b, s.StartUnixNano-p.prevStart)
	p.prevStart = s.StartUnixNano
	b = packio.AppendZZ(b, s.EndUnixNano-s.StartUnixNano)
	b = append(b, byte(s.Kind), byte(s.Status))
	b = p.str(b, s.Name)
	b = p.str(b, s.StatusMessage)
	b = p.str(b, s.Scope)
	k := 0
	if s.Resource != nil {
		k, _ = p.resource(s.Resource)
		k++
	}
	return binary.AppendUvarint(b, uint64(k))
}

// forget lets go of what the packer points to - the buffer and the resources packed - so that a
// packer kept for the next block keeps no request's memory alive. (The caches hold addresses as
// numbers, not pointers; begin clears them.)
func (p *packer) forget() {
	p.buf, p.res0, p.more, p.resAt, p.byContent, p.last = nil, [8]*Resource{}, nil, nil, nil, nil
}

// end writes the resources the spans named and fills in the header.
func (p *packer) end() {
	b := p.buf
	for k := range p.nRes {
		r := p.resourceAt(k)
		b = p.str(b, r.ServiceName)
		b = p.str(b, r.ServiceInstance)
		b = p.attrs(b, r.Attrs)
	}
	p.buf = b
	h := b[p.at+1:]
	for i, v := range [6]int{p.n, p.nRes, p.nAttrs, p.nLinks, p.nEvents, int(p.nStrs)} {
		binary.LittleEndian.PutUint32(h[4*i:], uint32(v))
	}
}

// resource returns r's index among the trace's distinct resources, adding it when new. Spans of
// one batch share a resource pointer, so the pointer usually decides; equal values (from several
// batches, when the analyzer packs a trace's spans again) are merged too.
func (p *packer) resource(r *Resource) (int, bool) {
	if r == p.last {
		return p.lastK, false
	}
	k := -1
	if p.resAt != nil {
		if v, ok := p.resAt[r]; ok {
			k = v
		}
	} else {
		for i := range p.nRes {
			if p.res0[i] == r {
				k = i
				break
			}
		}
	}
	if k < 0 && p.byContent != nil {
		for _, i := range p.byContent[p.resourceHash(r)] {
			if sameResource(p.resourceAt(int(i)), r) {
				k = int(i)
				break
			}
		}
	} else if k < 0 {
		for i := range p.nRes {
			if sameResource(p.resourceAt(i), r) {
				k = i
				break
			}
		}
	}
	fresh := k < 0
	if fresh {
		k = p.nRes
		if k < len(p.res0) {
			p.res0[k] = r
		} else {
			p.more = append(p.more, r)
		}
		p.nRes++
	}
	if p.resAt == nil && p.nRes > len(p.res0) {
		p.resAt = make(map[*Resource]int, 32)
		p.byContent = make(map[uint64][]int32, 32)
		p.seed = maphash.MakeSeed()
		for i := range p.nRes {
			p.resAt[p.resourceAt(i)] = i
			h := p.resourceHash(p.resourceAt(i))
			p.byContent[h] = append(p.byContent[h], int32(i))
		}
	} else if fresh && p.byContent != nil {
		h := p.resourceHash(r)
		p.byContent[h] = append(p.byContent[h], int32(k))
	}
	if p.resAt != nil {
		p.resAt[r] = k
	}
	p.last, p.lastK = r, k
	return k, fresh
}

func (p *packer) resourceAt(k int) *Resource {
	if k < len(p.res0) {
		return p.res0[k]
	}
	return p.more[k-len(p.res0)]
}

// resourceHash hashes what sameResource compares.
func (p *packer) resourceHash(r *Resource) uint64 {
	var h maphash.Hash
	h.SetSeed(p.seed)
	h.WriteString(r.ServiceName)
	h.WriteByte(0)
	h.WriteString(r.ServiceInstance)
	h.WriteByte(0)
	if r.Attrs == nil {
		h.WriteByte(1)
	}
	for _, a := range r.Attrs {
		maphash.WriteComparable(&h, a)
	}
	return h.Sum64()
}

func sameResource(a, b *Resource) bool {
	return a.ServiceName == b.ServiceName && a.ServiceInstance == b.ServiceInstance &&
		(a.Attrs == nil) == (b.Attrs == nil) && slices.Equal(a.Attrs, b.Attrs)
}

func (p *packer) str(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0)
	}
	// Two ways per set: a string that shares its set with another still stays.
	// The same bytes again (an interned string) is found without comparing them; equal bytes
	// elsewhere (a copy) by comparing.
	addr := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	gen := p.gen
	a := &p.byAddr[(addr>>3^addr>>11)%uintptr(len(p.byAddr))]
	if a.gen == gen && a.addr == addr && a.n == uint32(len(s)) {
		return binary.AppendUvarint(b, uint64(a.idx-1)<<1|1)
	}
	set := &p.cache[strHash(s)>>1]
	for k := range set {
		w := &set[k]
		if w.gen == gen && int(w.n) == len(s) && (w.addr == addr || string(b[w.off:w.off+w.n]) == s) {
			*a = addrSlot{addr: addr, n: w.n, idx: w.idx, gen: gen}
			return binary.AppendUvarint(b, uint64(w.idx-1)<<1|1)
		}
	}
	// The older way goes, an empty one (or one of another block) first. (Strings alike in length
	// and words, such as one host's URLs, meet in one set and push out only each other.)
	slot := &set[0]
	if set[0].gen == gen && (set[1].gen != gen || set[1].idx < set[0].idx) {
		slot = &set[1]
	}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	*slot = strSlot{addr: addr, off: uint32(len(b)), n: uint32(len(s)), idx: p.nStrs + 1, gen: gen}
	*a = addrSlot{addr: addr, n: uint32(len(s)), idx: p.nStrs + 1, gen: gen}
	p.nStrs++
	return append(b, s...)
}

// strHash picks a string's cache slot from its length and three 8-byte words (start, middle,
// end), not from every byte: equal strings meet in one slot whether or not they share their
// bytes (decoded strings alias a request each; well-known keys are one canonical string), and a
// string compared there is found equal in one step when it does share them.
func strHash(s string) uint8 {
	n := len(s)
	var x uint64
	if n >= 8 {
		x = word(s) ^ word(s[n/2-4:])*0xff51afd7ed558ccd ^ word(s[n-8:])*0xc4ceb9fe1a85ec53
	} else {
		for i := range n {
			x = x<<8 | uint64(s[i])
		}
	}
	x ^= uint64(n) * 0x9e3779b97f4a7c15
	x *= 0x9e3779b97f4a7c15
	return uint8(x >> 56)
}

// word is the first 8 bytes of s (len(s) >= 8), little endian.
func word(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func (p *packer) attrs(b []byte, as []Attr) []byte {
	b = packio.AppendCount(b, len(as), as == nil)
	p.nAttrs += len(as)
	for i := range as {
		b = p.attr(b, &as[i])
	}
	return b
}

// setCount writes, at at, where the caller left a byte for it, the count of a list of n written
// after it, as AppendCount does (0, a nil list, for none: the decoders leave an empty list nil). A
// count of 127 or more takes more than the byte: what was written after it moves along, and the
// string cache's offsets with it. (Only a writer that counts a list as it writes it needs this.)
func (p *packer) setCount(b []byte, at, n int) []byte {
	if n == 0 {
		return b
	}
	if n < 0x7f {
		b[at] = byte(n + 1)
		return b
	}
	var v [binary.MaxVarintLen64]byte
	w := binary.PutUvarint(v[:], uint64(n)+1)
	b = slices.Insert(b, at+1, v[1:w]...)
	b[at] = v[0]
	for i := range p.cache {
		for k := range p.cache[i] {
			if s := &p.cache[i][k]; s.gen == p.gen && int(s.off) > at {
				s.off += uint32(w - 1)
			}
		}
	}
	return b
}

// attr writes one attribute (not counted in the header: the caller counts its list).
func (p *packer) attr(b []byte, a *Attr) []byte {
	if k := keyCodeOf(a.Key); k != 0 {
		b = append(b, k)
	} else {
		b = p.str(append(b, 0), a.Key)
	}
	var tag byte
	if a.Str != "" {
		tag |= tagStr
	}
	if a.Num != 0 {
		tag |= tagNum
	}
	if a.Type < tagTypeEsc {
		b = append(b, tag|byte(a.Type))
	} else {
		b = append(b, tag|tagTypeEsc, byte(a.Type))
	}
	if a.Str != "" {
		b = p.str(b, a.Str)
	}
	if a.Num != 0 {
		if a.Type == ValueDouble {
			b = binary.LittleEndian.AppendUint64(b, uint64(a.Num))
		} else {
			b = packio.AppendZZ(b, a.Num)
		}
	}
	return b
}

// unpacker reads one packed trace: the packio.Reader over its bytes (S, the one copy every
// string aliases; the first error sticks, and the caller checks Err once per span), and what is
// left of the trace's arrays.
type unpacker struct {
	packio.Reader
	attrs  []Attr
	links  []Link
	events []Event
}

func (u *unpacker) attrList() []Attr {
	c, ok := u.Count()
	if !ok {
		return nil
	}
	if c > len(u.attrs) {
		u.Fail("%d attributes, %d left of the header's", c, len(u.attrs))
		return nil
	}
	if c == 0 {
		return []Attr{} // empty, not nil, as packed; a zero-size value allocates nothing
	}
	as := u.attrs[:c:c]
	u.attrs = u.attrs[c:]
	for i := range as {
		// Read into locals and stored once: every field, since an Unpacker's array holds what its
		// last use left, and without zeroing the element first (with the garbage collector
		// marking, a zeroing store of a struct with pointers goes through the bulk write barrier).
		var key string
		var tag byte
		if off, s := u.Off, u.S; off+1 < len(s) && s[off] != 0 && int(s[off]) <= len(packKeys) {
			// Nearly every attribute: a well-known key's byte and the tag, read with one check.
			key, tag, u.Off = packKeys[s[off]-1], s[off+1], off+2
		} else {
			if off < len(s) && s[off] != 0 {
				u.Off = off + 1
				if k := int(s[off]) - 1; k < len(packKeys) {
					key = packKeys[k]
				} else {
					u.Fail("attribute key %d of %d well-known", k, len(packKeys))
				}
			} else if u.Byte() == 0 && u.Err == nil {
				key = u.Str()
			}
			if off := u.Off; off < len(u.S) {
				tag, u.Off = u.S[off], off+1
			} else {
				tag = u.Byte() // fails: truncated
			}
		}
		typ := ValueType(tag & tagType)
		if tag&tagType == tagTypeEsc {
			typ = ValueType(u.Byte())
		}
		var str string
		if tag&tagStr != 0 {
			if str = u.Str(); str == "" && u.Err == nil {
				u.Fail("attribute %q: empty string marked present", key)
			}
		}
		var num int64
		if tag&tagNum != 0 {
			if typ == ValueDouble {
				if f := u.Fixed(8); len(f) == 8 {
					var v uint64
					for k := 7; k >= 0; k-- {
						v = v<<8 | uint64(f[k])
					}
					num = int64(v)
				}
			} else {
				num = u.ZZ()
			}
		}
		if u.Err != nil {
			return nil
		}
		a := &as[i]
		a.Key, a.Str, a.Num, a.Type = key, str, num, typ
	}
	return as
}
