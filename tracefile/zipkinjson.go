package tracefile

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/stormwatch/stormwatch/spans"
)

// zipkinSpan is one span of Zipkin's v2 JSON model (POST /api/v2/spans, GET /api/v2/trace/{id}):
// a document is an array of them.
type zipkinSpan struct {
	TraceID       string          `json:"traceId"`
	ID            string          `json:"id"`
	ParentID      string          `json:"parentId"`
	Name          string          `json:"name"`
	Kind          string          `json:"kind"`
	Timestamp     json.Number     `json:"timestamp"` // microseconds since the epoch
	Duration      json.Number     `json:"duration"`  // microseconds
	LocalEndpoint *zipkinEndpoint `json:"localEndpoint"`
	// RemoteEndpoint is the other side of a CLIENT (or PRODUCER) span: its serviceName is the
	// callee, kept as peer.service (OpenTelemetry's Zipkin exporter writes peer.service there).
	RemoteEndpoint *zipkinEndpoint    `json:"remoteEndpoint"`
	Annotations    []zipkinAnnotation `json:"annotations"`
	Tags           map[string]string  `json:"tags"`
	// Shared marks the server half of a span whose id the client half also has (B3 propagation
	// without a new span id per hop).
	Shared bool `json:"shared"`
}

type zipkinAnnotation struct {
	Timestamp json.Number `json:"timestamp"`
	Value     string      `json:"value"`
}

type zipkinEndpoint struct {
	ServiceName string `json:"serviceName"`
}

// decodeZipkinJSON reads a Zipkin v2 JSON array into one batch per trace.
//
// A shared span becomes two spans, as OpenTelemetry would have recorded the call: the client half
// keeps the id, the server half gets a derived one (SharedServerSpanID) with the client half as its
// parent, and the server's own children, which name the shared id as their parent, are moved
// under the server half. The analyzer then sees the attempt (CLIENT) and the call it caused
// (SERVER) as it would from OTLP.
func decodeZipkinJSON(body []byte, opt spans.DecodeOptions) ([]*spans.Batch, error) {
	if out, ok := walkZipkin(body, opt); ok {
		return out, nil
	}
	return decodeZipkinJSONReference(body, opt)
}

// decodeZipkinJSONReference is decodeZipkinJSON through encoding/json: the reference walkZipkin
// is held to.
func decodeZipkinJSONReference(body []byte, opt spans.DecodeOptions) ([]*spans.Batch, error) {
	if err := checkDepth(body, spans.MaxValueDepth); err != nil {
		return nil, fmt.Errorf("decode %s: %w", FormatZipkinJSON, err)
	}
	var doc []zipkinSpan
	if err := decodeDocument(body, &doc, FormatZipkinJSON); err != nil {
		return nil, err
	}
	d := zipkinDoc{opt: opt}
	for i := range doc {
		if err := d.add(&doc[i]); err != nil {
			return nil, err
		}
	}
	return d.batches(), nil
}

// zipkinDoc gathers a document's spans as they are mapped, for batches to hand them on.
type zipkinDoc struct {
	opt       spans.DecodeOptions
	resources map[zipkinResKey]*spans.Resource
	all       []spans.Span
	shared    []int // indexes in all of shared server halves
}

type zipkinResKey struct{ service, instance string }

// add maps the document's next span.
func (d *zipkinDoc) add(z *zipkinSpan) error {
	s, err := zipkinSpanOf(z, d.opt)
	if err != nil {
		return fmt.Errorf("decode %s: span %d (%s): %w", FormatZipkinJSON, len(d.all)+1, z.ID, err)
	}
	service := ""
	if z.LocalEndpoint != nil {
		service = z.LocalEndpoint.ServiceName
	}
	k := zipkinResKey{service, z.Tags[spans.AttrServiceInstance]}
	r := d.resources[k]
	if r == nil {
		if d.resources == nil {
			d.resources = map[zipkinResKey]*spans.Resource{}
		}
		r = &spans.Resource{ServiceName: k.service, ServiceInstance: k.instance}
		d.resources[k] = r
	}
	s.Resource = r
	if z.Shared && s.Kind == spans.KindServer {
		d.shared = append(d.shared, len(d.all))
	}
	d.all = append(d.all, s)
	return nil
}

// batches hands the spans on one batch a trace, shared spans split.
func (d *zipkinDoc) batches() []*spans.Batch {
	if len(d.shared) > 0 {
		splitShared(d.all, d.shared)
	}
	return spans.ByTrace(d.all)
}

func zipkinSpanOf(z *zipkinSpan, opt spans.DecodeOptions) (spans.Span, error) {
	var s spans.Span
	var err error
	if err = setIDs(&s, z.TraceID, z.ID); err != nil {
		return s, err
	}
	if z.ParentID != "" {
		if s.ParentID, err = parseSpanID(z.ParentID, "parentId"); err != nil {
			return s, err
		}
	}
	if err := setTimes(&s, z.Timestamp, z.Duration, "timestamp"); err != nil {
		return s, err
	}
	s.Name = z.Name
	switch z.Kind {
	case "":
		// OpenTelemetry's Zipkin exporters write INTERNAL as a span.kind tag.
		s.Kind = kindFromName(z.Tags[tagSpanKind])
	case "CLIENT", "SERVER", "PRODUCER", "CONSUMER":
		s.Kind = kindFromName(z.Kind)
	default:
		return s, fmt.Errorf("kind %q: want CLIENT, SERVER, PRODUCER or CONSUMER", z.Kind)
	}
	// Zipkin has no status: an "error" tag (its value the message) marks a failed span, and an
	// OpenTelemetry exporter adds otel.status_code.
	errMsg, errTag := z.Tags[tagError]
	if errTag && errMsg != "" && errMsg != "true" {
		s.StatusMessage = errMsg
	}
	if m := z.Tags[tagOtelStatusMessage]; m != "" {
		s.StatusMessage = m
	}
	s.Scope = z.Tags[tagOtelScopeName]
	if s.Scope == "" {
		s.Scope = z.Tags[tagOtelLibraryName]
	}
	// The attributes in order of their keys, which do not depend on map iteration, and in one
	// allocation, the keys too, not one for each time append outgrows them.
	var keys []string
	for k := range z.Tags {
		if isFieldTag(k) || k == spans.AttrServiceInstance || !keepAttr(k, opt) {
			continue
		}
		if keys == nil {
			keys = make([]string, 0, len(z.Tags))
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	peer := ""
	if z.RemoteEndpoint != nil && z.RemoteEndpoint.ServiceName != "" && keepAttr(spans.AttrPeerService, opt) {
		if _, ok := z.Tags[spans.AttrPeerService]; !ok {
			peer = z.RemoteEndpoint.ServiceName
		}
	}
	n := len(keys)
	if peer != "" {
		n++
	}
	if n > 0 {
		s.Attrs = make([]spans.Attr, 0, n)
	}
	for _, k := range keys {
		s.Attrs = append(s.Attrs, spans.StringAttr(k, z.Tags[k]))
	}
	if peer != "" {
		s.Attrs = append(s.Attrs, spans.StringAttr(spans.AttrPeerService, peer))
	}
	s.Status = deriveStatus(&s, z.Tags[tagOtelStatusCode], errTag)
	for _, a := range z.Annotations {
		at, err := microsToNanos(a.Timestamp, "annotation timestamp")
		if err != nil {
			return s, err
		}
		s.Events = append(s.Events, spans.Event{TimeUnixNano: at, Name: a.Value})
	}
	return s, nil
}

// splitShared gives the server halves of shared spans (all[i] for i in shared) ids of their own
// under their client halves, and moves the children each server half had to it.
func splitShared(all []spans.Span, shared []int) {
	type key struct {
		trace spans.TraceID
		id    spans.SpanID
	}
	halves := map[key][]int{}
	for _, i := range shared {
		k := key{all[i].TraceID, all[i].SpanID}
		halves[k] = append(halves[k], i)
	}
	for k, hs := range halves {
		// In order of start, ties in order of the file, so the numbering is the same on every read.
		sort.SliceStable(hs, func(a, b int) bool { return all[hs[a]].StartUnixNano < all[hs[b]].StartUnixNano })
		for n, i := range hs {
			all[i].ParentID = k.id
			all[i].SpanID = SharedServerSpanID(k.trace, k.id, n)
		}
	}
	isHalf := make(map[int]bool, len(shared))
	for _, i := range shared {
		isHalf[i] = true
	}
	for i := range all {
		s := &all[i]
		hs, ok := halves[key{s.TraceID, s.ParentID}]
		if !ok || isHalf[i] {
			continue
		}
		// A child in the server's service is the server half's; of several halves, the last one
		// that started before it. A child in another service is the client half's, as sent.
		owner := -1
		for _, h := range hs {
			if all[h].Service() == s.Service() && (owner < 0 || all[h].StartUnixNano <= s.StartUnixNano) {
				owner = h
			}
		}
		if owner >= 0 {
			s.ParentID = all[owner].SpanID
		}
	}
}
