package analyzer

import (
	"strings"
	"sync"

	"github.com/stormwatch/stormwatch/spans"
)

// maxInterned bounds the intern table: values beyond it (high-cardinality URLs, messages) are
// copied instead of shared, so the table cannot grow without limit in a long live session.
const maxInterned = 1 << 16

// interner gives held spans strings of their own. Decoders alias the request buffer, so a held
// span would otherwise pin its whole request (or file line) - and an operation or finding made
// from it would pin it for the rest of the run. Service names, methods, URLs and statuses repeat
// endlessly, so most strings end up shared.
type interner struct {
	strs map[string]string
	// derived caches the origin and target computed from a call's attributes: the same URLs
	// come back call after call, and building "scheme://host:port" each time is an allocation.
	// The analysis reads it outside the analyzer's lock (ingestion must not wait for it), so it
	// has a lock of its own; everything else here is used under the analyzer's lock.
	derivedMu sync.Mutex
	derived   map[derivedKey]string
	res       map[*spans.Resource]*spans.Resource // per batch: the decoder's resource -> ours
	ress      map[resKey]*spans.Resource          // ours, by identity
}

type resKey struct{ service, instance string }

func newInterner() *interner {
	return &interner{strs: map[string]string{}, derived: map[derivedKey]string{}, res: map[*spans.Resource]*spans.Resource{}, ress: map[resKey]*spans.Resource{}}
}

func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := in.strs[s]; ok {
		return v
	}
	c := strings.Clone(s)
	if len(in.strs) < maxInterned {
		in.strs[c] = c
	}
	return c
}

func (in *interner) attrs(as []spans.Attr) {
	for i := range as {
		as[i].Key = in.str(as[i].Key)
		as[i].Str = in.str(as[i].Str)
	}
}

func (in *interner) resource(r *spans.Resource) *spans.Resource {
	if r == nil {
		return nil
	}
	if v, ok := in.res[r]; ok {
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
func (in *interner) endBatch() { clear(in.res) }

type derivedKey struct {
	what    byte // 'o' origin from a URL, 'h' origin from host and port, 't' target
	a, b, c string
	rpc     bool
}

// origin is originOf, cached for the common shapes (a URL; or host, port and scheme).
func (in *interner) origin(s *spans.Span) string {
	var k derivedKey
	if u := s.Str(spans.AttrURLFull); strings.Contains(u, "://") {
		k = derivedKey{what: 'o', a: u}
	} else if h := s.Str(spans.AttrServerAddress); h != "" && s.Str(spans.AttrLegacyHTTPURL) == "" {
		k = derivedKey{what: 'h', a: h, b: s.Str(spans.AttrServerPort), c: s.Str(spans.AttrURLScheme),
			rpc: s.Str(spans.AttrRPCSystem) != "" || s.Str(spans.AttrRPCMethod) != ""}
	} else {
		return originOf(s)
	}
	return in.cached(k, s, originOf)
}

// target is targetOf, cached by method and URL (HTTP) or service and method (RPC).
func (in *interner) target(s *spans.Span) string {
	var k derivedKey
	if m := s.Str(spans.AttrRPCMethod); m != "" {
		k = derivedKey{what: 'r', a: s.Str(spans.AttrRPCService), b: m}
	} else if u := s.Str(spans.AttrURLFull); u != "" {
		k = derivedKey{what: 't', a: u, b: s.Str(spans.AttrHTTPMethod)}
		if k.b == "" {
			return targetOf(s)
		}
	} else {
		return targetOf(s)
	}
	return in.cached(k, s, targetOf)
}

func (in *interner) cached(k derivedKey, s *spans.Span, f func(*spans.Span) string) string {
	in.derivedMu.Lock()
	v, ok := in.derived[k]
	in.derivedMu.Unlock()
	if ok {
		return v
	}
	v = f(s)
	in.derivedMu.Lock()
	if len(in.derived) < maxInterned {
		// The key's strings are already interned (held spans' strings are), so the cache
		// pins nothing.
		in.derived[k] = v
	}
	in.derivedMu.Unlock()
	return v
}
