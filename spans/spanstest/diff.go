package spanstest

import (
	"fmt"
	"math"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

// Diff compares two batches span by span and returns "" when they hold the same spans, or a
// description of the first differences. Nil and empty slices are equal, and resources compare by
// value, so batches from different decoders (which share and allocate differently) can be compared.
func Diff(want, got *spans.Batch) string {
	var d differ
	if want.Rejected != got.Rejected || want.RejectReason != got.RejectReason {
		d.add("rejected: want %d %q, got %d %q", want.Rejected, want.RejectReason, got.Rejected, got.RejectReason)
	}
	if len(want.Spans) != len(got.Spans) {
		d.add("spans: want %d, got %d", len(want.Spans), len(got.Spans))
	}
	for i := 0; i < min(len(want.Spans), len(got.Spans)) && len(d.lines) < 20; i++ {
		spanDiff(&d, fmt.Sprintf("span[%d]", i), &want.Spans[i], &got.Spans[i])
	}
	return strings.Join(d.lines, "\n")
}

type differ struct{ lines []string }

func (d *differ) add(format string, args ...any) {
	d.lines = append(d.lines, fmt.Sprintf(format, args...))
}

func (d *differ) eq(path, field string, want, got any) {
	if want != got {
		d.add("%s.%s: want %v, got %v", path, field, want, got)
	}
}

func spanDiff(d *differ, p string, w, g *spans.Span) {
	d.eq(p, "TraceID", w.TraceID, g.TraceID)
	d.eq(p, "SpanID", w.SpanID, g.SpanID)
	d.eq(p, "ParentID", w.ParentID, g.ParentID)
	d.eq(p, "StartUnixNano", w.StartUnixNano, g.StartUnixNano)
	d.eq(p, "EndUnixNano", w.EndUnixNano, g.EndUnixNano)
	d.eq(p, "Kind", w.Kind, g.Kind)
	d.eq(p, "Status", w.Status, g.Status)
	d.eq(p, "Name", fmt.Sprintf("%q", w.Name), fmt.Sprintf("%q", g.Name))
	d.eq(p, "StatusMessage", fmt.Sprintf("%q", w.StatusMessage), fmt.Sprintf("%q", g.StatusMessage))
	d.eq(p, "Scope", fmt.Sprintf("%q", w.Scope), fmt.Sprintf("%q", g.Scope))
	switch {
	case (w.Resource == nil) != (g.Resource == nil):
		d.add("%s.Resource: want %v, got %v", p, w.Resource, g.Resource)
	case w.Resource != nil:
		d.eq(p, "Resource.ServiceName", fmt.Sprintf("%q", w.Resource.ServiceName), fmt.Sprintf("%q", g.Resource.ServiceName))
		d.eq(p, "Resource.ServiceInstance", fmt.Sprintf("%q", w.Resource.ServiceInstance), fmt.Sprintf("%q", g.Resource.ServiceInstance))
		attrsDiff(d, p+".Resource.Attrs", w.Resource.Attrs, g.Resource.Attrs)
	}
	attrsDiff(d, p+".Attrs", w.Attrs, g.Attrs)
	if len(w.Links) != len(g.Links) {
		d.add("%s.Links: want %d, got %d", p, len(w.Links), len(g.Links))
	} else {
		for i := range w.Links {
			lp := fmt.Sprintf("%s.Links[%d]", p, i)
			d.eq(lp, "TraceID", w.Links[i].TraceID, g.Links[i].TraceID)
			d.eq(lp, "SpanID", w.Links[i].SpanID, g.Links[i].SpanID)
			attrsDiff(d, lp+".Attrs", w.Links[i].Attrs, g.Links[i].Attrs)
		}
	}
	if len(w.Events) != len(g.Events) {
		d.add("%s.Events: want %d, got %d", p, len(w.Events), len(g.Events))
	} else {
		for i := range w.Events {
			ep := fmt.Sprintf("%s.Events[%d]", p, i)
			d.eq(ep, "TimeUnixNano", w.Events[i].TimeUnixNano, g.Events[i].TimeUnixNano)
			d.eq(ep, "Name", fmt.Sprintf("%q", w.Events[i].Name), fmt.Sprintf("%q", g.Events[i].Name))
			attrsDiff(d, ep+".Attrs", w.Events[i].Attrs, g.Events[i].Attrs)
		}
	}
}

func attrsDiff(d *differ, p string, w, g []spans.Attr) {
	if len(w) != len(g) {
		d.add("%s: want %d %v, got %d %v", p, len(w), w, len(g), g)
		return
	}
	for i := range w {
		if w[i] != g[i] && !bothNaN(w[i], g[i]) {
			d.add("%s[%d]: want %+v, got %+v", p, i, w[i], g[i])
		}
	}
}

// bothNaN reports whether a and b are the same key's double NaN, whatever their payload bits:
// OTLP/JSON writes every NaN as "NaN", so a request's payload bits cannot survive it, and
// nothing reads them.
func bothNaN(a, b spans.Attr) bool {
	isNaN := func(x spans.Attr) bool {
		return x.Type == spans.ValueDouble && math.IsNaN(math.Float64frombits(uint64(x.Num)))
	}
	return a.Key == b.Key && a.Str == b.Str && isNaN(a) && isNaN(b)
}
