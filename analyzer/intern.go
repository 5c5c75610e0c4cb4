package analyzer

import (
	"strings"

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
	res  map[*spans.Resource]*spans.Resource // per batch: the decoder's resource -> ours
	ress map[resKey]*spans.Resource          // ours, by identity
}

type resKey struct{ service, instance string }

func newInterner() *interner {
	return &interner{strs: map[string]string{}, res: map[*spans.Resource]*spans.Resource{}, ress: map[resKey]*spans.Resource{}}
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
