package analyzer

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stormwatch/stormwatch/spans"
)

// maxInterned bounds the intern table: values beyond it (high-cardinality URLs, messages) are
// copied instead of shared, so the table cannot grow without limit in a long live session.
const maxInterned = 1 << 16

// interner gives held spans strings of their own. Decoders alias the request buffer, so a held
// span would otherwise pin its whole request (or file line) - and an operation or finding made
// from it would pin it for the rest of the run. Service names, methods, paths and statuses repeat
// endlessly, so most strings end up shared; values unique to a span are only copied.
type interner struct {
	strs map[string]string
	// derived caches the origin and target computed from a call's attributes: the same URLs
	// come back call after call, and building "scheme://host:port" each time is an allocation.
	// The analysis reads it outside the analyzer's lock (ingestion must not wait for it), so it
	// has a lock of its own; everything else here is used under the analyzer's lock.
	derivedMu sync.Mutex
	derived   map[derivedKey]string
	// derivedCounts (under derivedMu) and bypass: see countDerived.
	derivedCounts [5]derivedCount
	bypass        [5]atomic.Int64
	res           map[*spans.Resource]*spans.Resource // per batch: the decoder's resource -> ours
	ress          map[resKey]*spans.Resource          // ours, by identity
	// lastRes is the decoder's resource resource() mapped last, lastOurs what to; per batch.
	lastRes, lastOurs *spans.Resource
	// recent are strings interned lately, by recentSlot (see str).
	recent [1 << recentBits]string
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

type resKey struct{ service, instance string }

func newInterner() *interner {
	return &interner{strs: map[string]string{}, derived: map[derivedKey]string{}, res: map[*spans.Resource]*spans.Resource{}, ress: map[resKey]*spans.Resource{}}
}

func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	// Most strings were interned moments ago (the same keys, names and values on span after
	// span): a small direct-mapped table of recent ones answers with one compare, where the
	// map hashes the whole string.
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

func (in *interner) attrs(as []spans.Attr) {
	for i := range as {
		a := &as[i]
		a.Key = in.str(a.Key)
		if a.Str == "" {
			continue
		}
		if uniquePerSpan(a.Key) {
			// A table lookup would miss and an insert would never be hit again: copy only.
			a.Str = strings.Clone(a.Str)
		} else {
			a.Str = in.str(a.Str)
		}
	}
}

// uniquePerSpan reports the attributes whose values rarely repeat from one span to the next:
// full URLs, paths and targets carry request ids and query strings, operation ids and
// idempotency keys are one per logical operation. Interning them costs a table lookup and insert
// per span and fills the table with entries that are never hit.
func uniquePerSpan(key string) bool {
	switch key {
	case spans.AttrURLFull, spans.AttrURLPath, spans.AttrLegacyHTTPURL, spans.AttrLegacyHTTPTarget, spans.AttrOpID,
		spans.AttrIdempotencyKey, spans.AttrReqHeaderIdempotencyKey:
		return true
	}
	return false
}

func (in *interner) resource(r *spans.Resource) *spans.Resource {
	if r == nil {
		return nil
	}
	if r == in.lastRes {
		// The spans of one resource come one after another.
		return in.lastOurs
	}
	if v, ok := in.res[r]; ok {
		in.lastRes, in.lastOurs = r, v
		return v
	}
	k := resKey{r.ServiceName, r.ServiceInstance}
	v, ok := in.ress[k]
	if !ok || len(v.Attrs) != len(r.Attrs) {
		v = &spans.Resource{ServiceName: in.str(r.ServiceName), ServiceInstance: in.str(r.ServiceInstance),
			Attrs: append([]spans.Attr(nil), r.Attrs...)}
		in.attrs(v.Attrs)
		if len(in.ress) < maxInterned {
			in.ress[resKey{v.ServiceName, v.ServiceInstance}] = v
		}
	}
	in.res[r] = v
	in.lastRes, in.lastOurs = r, v
	return v
}

// span makes s independent of the buffer it was decoded from. Attribute slices are the
// decoder's; their strings are replaced in place (the batch is ours).
func (in *interner) span(s *spans.Span) {
	s.Name = in.str(s.Name)
	s.StatusMessage = in.str(s.StatusMessage)
	s.Scope = in.str(s.Scope)
	s.Resource = in.resource(s.Resource)
	in.attrs(s.Attrs)
	for i := range s.Links {
		in.attrs(s.Links[i].Attrs)
	}
	for i := range s.Events {
		s.Events[i].Name = in.str(s.Events[i].Name)
		in.attrs(s.Events[i].Attrs)
	}
}

// endBatch forgets the per-batch resource mapping (the decoder's resources die with the batch).
func (in *interner) endBatch() {
	clear(in.res)
	// A later batch's resource may come at the same address.
	in.lastRes, in.lastOurs = nil, nil
}

type derivedKey struct {
	what    byte // 'o' origin from a URL's scheme and authority, 'h'/'n' from host and port, 'r'/'t' target
	a, b, c string
	port    int64 // 'n': an integer server.port (as a number, not made into text for the key)
	rpc     bool
}

// origin is originOf, cached for the common shapes: a URL, keyed by its scheme://authority prefix
// alone (originOfURL reads nothing else, and the rest of a real URL - path ids, query strings -
// is different on every call); or host, port and scheme.
func (in *interner) origin(s *known, l1 *derivedL1) string {
	var k derivedKey
	if u := s.str(wkURLFull); strings.Contains(u, "://") {
		p, ok := urlAuthorityPrefix(u)
		if !ok {
			// originOfURL finds no origin there and originOf falls back to other attributes.
			return s.origin()
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
		return s.origin()
	}
	return in.cached(k, s, (*known).origin, l1)
}

// urlAuthorityPrefix is the part of u that originOfURL reads - everything up to the end of the
// authority ("scheme://userinfo@host:port") - and false when originOfURL would find no origin in
// it. It cuts the same way originOfURL does, without allocating.
func urlAuthorityPrefix(u string) (string, bool) {
	i := strings.Index(u, "://")
	if i <= 0 {
		return "", false
	}
	end := len(u)
	if j := indexEndOfAuthority(u[i+3:]); j >= 0 {
		end = i + 3 + j
	}
	auth := u[i+3 : end]
	if j := strings.LastIndexByte(auth, '@'); j >= 0 {
		auth = auth[j+1:]
	}
	if auth == "" {
		return "", false
	}
	return u[:end], true
}

// target is targetOf, cached by method and path (HTTP: targetOf drops the query and fragment, which
// differ on every call) or service and method (RPC).
func (in *interner) target(s *known, l1 *derivedL1) string {
	var k derivedKey
	if m := s.str(wkRPCMethod); m != "" {
		k = derivedKey{what: 'r', a: s.str(wkRPCService), b: m}
	} else if u := s.str(wkURLFull); u != "" {
		k = derivedKey{what: 't', a: pathOfURL(u), b: s.str(wkHTTPMethod)}
		if k.b == "" {
			return s.target()
		}
	} else {
		return s.target()
	}
	return in.cached(k, s, (*known).target, l1)
}

// cached looks k up in l1 (when not nil), then in the shared cache, and computes f(s) when
// neither has it.
func (in *interner) cached(k derivedKey, s *known, f func(*known) string, l1 *derivedL1) string {
	var e *derivedEntry
	if l1 != nil {
		e = &l1[k.slot()]
		if e.ok && e.k == k {
			return e.v
		}
	}
	kind := derivedKind(k.what)
	var v string
	if in.bypass[kind].Load() > 0 {
		// This kind's keys have not been coming back: made again, not looked up.
		in.bypass[kind].Add(-1)
		v = f(s)
	} else {
		in.derivedMu.Lock()
		var ok bool
		v, ok = in.derived[k]
		in.countDerived(kind, ok)
		in.derivedMu.Unlock()
		if !ok {
			v = in.derive(k, s, f)
		}
	}
	if e != nil {
		*e = derivedEntry{k: k, v: v, ok: true}
	}
	return v
}

// Derived values are cheap to make again; the shared cache pays when their keys come back. When
// they do not - targets of URLs with an id in the path, on every call - a lookup is a lock and a
// hash of the key for nothing, and, until the cache is full, an insert with three copies. So the
// cache counts its hits per kind of key over windows of derivedWindow lookups, and a kind that hit
// less than one lookup in eight skips the shared cache for its next derivedBypass values (the
// analysis's own small cache still answers first), then is measured again.
const (
	derivedWindow = 4096
	derivedBypass = 1 << 16
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

func (in *interner) derive(k derivedKey, s *known, f func(*known) string) string {
	v := f(s)
	in.derivedMu.Lock()
	if len(in.derived) < maxInterned {
		// The key's strings may be parts of a held span's URL (copied, not interned): a key of
		// their own keeps the cache from pinning that span's strings.
		k.a, k.b, k.c = strings.Clone(k.a), strings.Clone(k.b), strings.Clone(k.c)
		in.derived[k] = v
	}
	in.derivedMu.Unlock()
	return v
}

// derivedL1 is a small cache of derived values in front of the interner's shared one, private to
// one analysis at a time (it lives in a scratch, and stays there from trace to trace): a hit
// costs a few compares where the shared cache costs a lock and a map lookup that hashes every
// string of the key. Direct-mapped: a key that collides with another replaces it.
type derivedL1 [64]derivedEntry

type derivedEntry struct {
	k  derivedKey
	v  string
	ok bool
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
	if len(s) > 8 {
		s = s[len(s)-8:]
	}
	var x uint64
	for i := 0; i < len(s); i++ {
		x = x<<8 | uint64(s[i])
	}
	return x
}
