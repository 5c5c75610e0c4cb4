package engine

import (
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The interner: shared copies of the strings an analysis keeps (service names, methods,
// dependencies repeat trace after trace), a cache of the origins and targets derived from them,
// and the pool of analysis scratches. It is the one part of the Engine that analyses running
// outside the Engine's lock share, so its string table has a lock of its own.

// maxInterned bounds the intern table: values beyond it (high-cardinality URLs, messages) are
// copied instead of shared, so the table cannot grow without limit in a long live session.
const maxInterned = 1 << 16

// maxDerived bounds the cache of derived origins and targets. Keys that repeat come from a few
// hundred or thousand endpoints; many more are URLs with ids in them, for which a lookup in a
// table of tens of thousands of entries missed the processor's caches and cost several times
// what making the value again does (a concatenation). A full cache is emptied and fills again
// with the keys that come back; a kind whose keys do not is bypassed (see countDerived).
const maxDerived = 1 << 12

// interner gives what the analysis keeps strings of its own (see detachOps and detachRest): held spans are packed,
// and an analysis reads them back with strings aliasing the packed bytes, so an operation or a
// finding made from them would otherwise keep those bytes alive after the trace is dropped.
// Service names, methods, dependencies and statuses repeat endlessly, so most strings end up
// shared; values unique to an operation are only copied.
type interner struct {
	// strMu guards strs and recent: analyses run outside the analyzer's lock, and an eviction
	// (under it) may analyze while a pass does.
	strMu sync.Mutex
	strs  map[string]string
	// recent are strings interned lately, by recentSlot (see strLocked).
	recent [1 << recentBits]string
	// derived caches the origin and target computed from a call's attributes: the same URLs
	// come back call after call, and building "scheme://host:port" each time is an allocation.
	// It has a lock of its own.
	derivedMu sync.Mutex
	derived   map[derivedKey]derivedEntry // the entries' keys are copies of the cache's own
	// derivedCounts (under derivedMu) and bypass: see countDerived.
	derivedCounts [5]derivedCount
	bypass        [5]atomic.Int64
	// scratches are the analyses' reusable buffers (see scratch): taken and given back by the
	// analyses, which run outside the analyzer's lock, so a pool (locked on its own).
	scratches sync.Pool
}

// getScratch takes a scratch for one trace's analysis; putScratch gives it back.
func (in *interner) getScratch() *scratch {
	if sc, ok := in.scratches.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

func (in *interner) putScratch(sc *scratch) {
	sc.reset()
	in.scratches.Put(sc)
}

func newInterner() *interner {
	return &interner{strs: map[string]string{}, derived: map[derivedKey]derivedEntry{}}
}

// lockStr and unlockStr bracket calls of strLocked.
func (in *interner) lockStr()   { in.strMu.Lock() }
func (in *interner) unlockStr() { in.strMu.Unlock() }

// strLocked is s as a string of the interner's own, shared with every equal string interned
// before (while the table has room; a copy after). The caller holds lockStr.
func (in *interner) strLocked(s string) string {
	if s == "" {
		return ""
	}
	// Most strings were interned moments ago (the same services, names and statuses operation
	// after operation): a small direct-mapped table of recent ones answers with one compare,
	// where the map hashes the whole string.
	e := &in.recent[recentSlot(s)]
	if *e == s {
		return *e
	}
	if v, ok := in.strs[s]; ok {
		*e = v
		return v
	}
	c := strings.Clone(s)
	if len(in.strs) < maxInterned {
		in.strs[c] = c
	}
	*e = c
	return c
}

// recentSlot picks s's entry in interner.recent from its length and its first and last bytes.
func recentSlot(s string) int {
	n := len(s)
	var x uint64
	if n >= 8 {
		x = load64(s) ^ load64(s[n-8:])*0xff51afd7ed558ccd
	} else {
		for i := 0; i < n; i++ {
			x = x<<8 | uint64(s[i])
		}
	}
	x ^= uint64(n) * 0xc4ceb9fe1a85ec53
	x *= 0x9e3779b97f4a7c15
	return int(x >> (64 - recentBits))
}

func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

const recentBits = 8

type derivedKey struct {
	what    byte // 'o' origin from a URL's scheme and authority, 'h'/'n' from host and port, 'r'/'t' target
	a, b, c string
	port    int64 // 'n': an integer server.port (as a number, not made into text for the key)
	rpc     bool
}

// originAndTarget is origin and target of one call, its url.full read and its "://" found once
// for both, and host, the origin's analyzer.HostDependency when a cache had it (else "": the
// caller names the host itself, see hostNames).
func (in *interner) originAndTarget(s *known, l1 *derivedL1) (origin, target, host string) {
	u := s.str(wkURLFull)
	i := schemeEnd(u)
	origin, host = in.originAt(s, u, i, l1)
	return origin, in.targetAt(s, u, i, l1), host
}

// origin is originOf, cached for the common shapes: a URL, keyed by its scheme://authority prefix
// alone (originOfURL reads nothing else, and the rest of a real URL - path ids, query strings -
// is different on every call); or host, port and scheme.
func (in *interner) origin(s *known, l1 *derivedL1) string {
	u := s.str(wkURLFull)
	o, _ := in.originAt(s, u, schemeEnd(u), l1)
	return o
}

// originAt is origin, given s's url.full u and the index of its first "://" (-1: none), with
// the origin's host name as a cached entry has it (see derivedEntry.host; "" when none did).
func (in *interner) originAt(s *known, u string, i int, l1 *derivedL1) (origin, host string) {
	var k derivedKey
	if i >= 0 {
		p, ok := urlAuthorityPrefixAt(u, i)
		if !ok {
			// originOfURL finds no origin there and originOf falls back to other attributes.
			return s.origin(), ""
		}
		k = derivedKey{what: 'o', a: p}
	} else if h := s.str(wkServerAddress); h != "" && s.str(wkLegacyHTTPURL) == "" {
		k = derivedKey{what: 'h', a: h, c: s.str(wkURLScheme),
			rpc: s.str(wkRPCSystem) != "" || s.str(wkRPCMethod) != ""}
		if p, ok := s.attr(wkServerPort); ok && p.Type == spans.ValueInt {
			// The number is the key: its text would be an allocation per call.
			k.what, k.port = 'n', p.Num
		} else {
			k.b = p.AsString()
		}
	} else {
		return s.origin(), ""
	}
	return in.cachedWithHost(k, s, originFor, l1)
}

// urlAuthorityPrefixAt is the part of u that originOfURL reads - everything up to the end of the
// authority ("scheme://userinfo@host:port") - and false when originOfURL would find no origin in
// it. i is the index of u's first "://" (-1: none), which the caller has looked for already. It
// cuts the same way originOfURL does, without allocating.
func urlAuthorityPrefixAt(u string, i int) (string, bool) {
	if i <= 0 {
		return "", false
	}
	end := len(u)
	if j := indexEndOfAuthority(u[i+3:]); j >= 0 {
		end = i + 3 + j
	}
	if hostOfAuthority(u[i+3:end]) == "" {
		return "", false
	}
	return u[:end], true
}

// target is targetOf, cached by method and path (HTTP: targetOf drops the query and fragment, which
// differ on every call) or service and method (RPC).
func (in *interner) target(s *known, l1 *derivedL1) string {
	u := s.str(wkURLFull)
	return in.targetAt(s, u, schemeEnd(u), l1)
}

// targetAt is target, given s's url.full u and the index of its first "://" (-1: none).
func (in *interner) targetAt(s *known, u string, i int, l1 *derivedL1) string {
	var k derivedKey
	if m := s.str(wkRPCMethod); m != "" {
		k = derivedKey{what: 'r', a: s.str(wkRPCService), b: m}
	} else if u != "" {
		k = derivedKey{what: 't', a: pathOfURLAt(u, i), b: s.str(wkHTTPMethod)}
		if k.b == "" {
			return s.target()
		}
		// What s.target() gives for such a span (the method, and the path of url.full), made
		// from the key: the path is not cut out of the URL a second time.
		return in.cached(k, s, httpTargetOfKey, l1)
	} else {
		return s.target()
	}
	return in.cached(k, s, targetFor, l1)
}

// The derivations cached: from the span's attributes, or from the key that was made of them
// (into m, when the derivation makes a string of its own: see madeStrings).
func originFor(s *known, _ derivedKey, _ *madeStrings) string { return s.origin() }
func targetFor(s *known, _ derivedKey, _ *madeStrings) string { return s.target() }
func httpTargetOfKey(_ *known, k derivedKey, m *madeStrings) string {
	return strings.TrimSpace(m.join(k.b, " ", k.a))
}

// cached looks k up in l1 (when not nil), then in the shared cache, and computes f(s, &k) when
// neither has it.
func (in *interner) cached(k derivedKey, s *known, f deriveFunc, l1 *derivedL1) string {
	v, _ := in.cachedWithHost(k, s, f, l1)
	return v
}

// cachedWithHost is cached, with the entry's host (see derivedEntry.host): "" for a value made
// again without the shared cache (its kind bypassed).
func (in *interner) cachedWithHost(k derivedKey, s *known, f deriveFunc, l1 *derivedL1) (v, host string) {
	var e *derivedEntry
	var m *madeStrings
	if l1 != nil {
		e = &l1.entries[k.slot()]
		if e.ok && e.k == k {
			return e.v, e.host
		}
		m = &l1.made
	}
	kind := derivedKind(k.what)
	if in.bypass[kind].Load() > 0 {
		// This kind's keys have not been coming back: made again, not looked up.
		in.bypass[kind].Add(-1)
		return f(s, k, m), ""
	}
	in.derivedMu.Lock()
	own, ok := in.derived[k]
	in.countDerived(kind, ok)
	in.derivedMu.Unlock()
	if !ok {
		own = in.derive(k, s, f, m)
	}
	// l1 outlives the trace: it takes only the cache's own entry, whose key and value are copies.
	// The caller's key and a value made from it are parts of the span's strings (a URL's
	// authority is a slice of it), which alias the trace's packed bytes.
	if e != nil {
		*e = own
	}
	return own.v, own.host
}

// Derived values are cheap to make again; the shared cache pays when their keys come back. When
// they do not - targets of URLs with an id in the path, on every call - a lookup is a lock and a
// hash of the key for nothing, and, until the cache is full, an insert with three copies. So the
// cache counts its hits per kind of key over windows of derivedWindow lookups, and a kind that hit
// less than one lookup in eight skips the shared cache for its next derivedBypass values (the
// analysis's own small cache still answers first), then is measured again. A window that measures
// costs a lookup and an insert per value, several times the value (made in a chunk, see
// madeStrings): one window in 65 lookups, a kind that does not come back costs little more than
// making its values; one that starts to come back is found within a few seconds of a collector's
// calls.
const (
	derivedWindow = 4096
	derivedBypass = 1 << 18
)

type derivedCount struct{ lookups, hits int }

// derivedKind numbers derivedKey.what: 'o', 'h', 'n' (origins), 'r', 't' (targets).
func derivedKind(what byte) int {
	switch what {
	case 'o':
		return 0
	case 'h':
		return 1
	case 'n':
		return 2
	case 'r':
		return 3
	}
	return 4
}

// countDerived counts a lookup of a kind (under derivedMu) and starts a bypass when the window
// ends with too few hits.
func (in *interner) countDerived(kind int, hit bool) {
	c := &in.derivedCounts[kind]
	c.lookups++
	if hit {
		c.hits++
	}
	if c.lookups >= derivedWindow {
		if c.hits*8 < c.lookups {
			in.bypass[kind].Store(derivedBypass)
		}
		*c = derivedCount{}
	}
}

// deriveFunc makes the value of key k for span s, writing a string it makes into m (see
// madeStrings; nil: allocated).
type deriveFunc func(s *known, k derivedKey, m *madeStrings) string

// derive makes k's value and caches it, emptying a full cache first; the entry returned is the
// cache's own (key and value copies).
func (in *interner) derive(k derivedKey, s *known, f deriveFunc, m *madeStrings) derivedEntry {
	v := f(s, k, m) // copied below: made in m, it costs no allocation of its own
	// The key's strings and the value may be parts of the spans' strings, which alias their
	// packed bytes: copies of their own keep the cache from pinning them.
	k.a, k.b, k.c = strings.Clone(k.a), strings.Clone(k.b), strings.Clone(k.c)
	e := derivedEntry{k: k, v: strings.Clone(v), ok: true}
	if k.what == 'o' || k.what == 'h' || k.what == 'n' { // an origin
		e.host = analyzer.HostDependency(e.v)
	}
	in.derivedMu.Lock()
	defer in.derivedMu.Unlock()
	if len(in.derived) >= maxDerived {
		clear(in.derived)
	}
	in.derived[k] = e
	return e
}

// derivedL1 is a small cache of derived values in front of the interner's shared one, private to
// one analysis at a time (it lives in a scratch, and stays there from trace to trace): a hit
// costs a few compares where the shared cache costs a lock and a map lookup that hashes every
// string of the key. Direct-mapped: a key that collides with another replaces it. It holds only
// the shared cache's own entries (copies), so keeping it pins no trace's packed spans. made is
// where the analysis writes the values no cache keeps.
type derivedL1 struct {
	entries [64]derivedEntry
	made    madeStrings
}

// madeStrings is where one analysis at a time writes the derived values that no cache keeps: the
// targets of URLs with an id in the path, made on every call (see countDerived). Allocated one by
// one they were an allocation per call, half of a collector's per span; written one after the
// other into a chunk of madeChunk bytes they are one per chunk. A chunk is never written again
// where a string was made of it (a full one is left to the strings made of it and a new one
// taken), so a string made in one stays valid however long it is kept; it keeps its whole chunk
// alive with it. A live analyzer keeps none of them - the operations they name are held packed,
// and the findings are copies - and an analysis whose operations are held as values (offline)
// sets held, so that their names keep no chunk alive: they are allocated one by one there.
type madeStrings struct {
	buf  []byte
	held bool
}

// madeChunk is the size of a chunk of madeStrings: about fifty targets.
const madeChunk = 2048

// join is a+sep+b, written into m's chunk (allocated on its own when m is nil or held, or it is
// over a quarter of a chunk).
func (m *madeStrings) join(a, sep, b string) string {
	n := len(a) + len(sep) + len(b)
	if m == nil || m.held || n == 0 || n > madeChunk/4 {
		return a + sep + b
	}
	if cap(m.buf)-len(m.buf) < n {
		m.buf = make([]byte, 0, madeChunk)
	}
	at := len(m.buf)
	m.buf = append(append(append(m.buf, a...), sep...), b...)
	return unsafe.String(&m.buf[at], n)
}

type derivedEntry struct {
	k derivedKey
	v string
	// host is an origin's analyzer.HostDependency (a part of v): the name its calls go by when
	// nothing else names their callee. Found once per entry, where naming each trace's calls by
	// their host parsed it again, trace after trace, and asked whether it is a loopback address
	// (net/netip's answer for a name that is not one is an allocation).
	host string
	ok   bool
}

// slot picks k's entry in a derivedL1 from its lengths, its last bytes and its port: cheap, and
// different for the origins and targets a workload has (they differ in their hosts, ports and
// paths, which end their strings).
func (k *derivedKey) slot() int {
	h := uint64(k.what) | uint64(len(k.a))<<8 | uint64(len(k.b))<<24 | uint64(len(k.c))<<40
	h ^= tail8(k.a) * 0x9e3779b97f4a7c15
	h ^= tail8(k.b) * 0xff51afd7ed558ccd
	h ^= tail8(k.c) * 0xc4ceb9fe1a85ec53
	h ^= uint64(k.port)
	if k.rpc {
		h ^= 0x5bd1e995
	}
	h *= 0x9e3779b97f4a7c15
	return int(h >> 58)
}

// tail8 is the last (up to) eight bytes of s as a number.
func tail8(s string) uint64 {
	if len(s) >= 8 {
		// One load where the loop below takes eight: every span's origin and target is looked up.
		return load64(s[len(s)-8:])
	}
	var x uint64
	for i := 0; i < len(s); i++ {
		x = x<<8 | uint64(s[i])
	}
	return x
}
