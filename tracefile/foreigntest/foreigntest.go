// Package foreigntest writes spans in the Jaeger and Zipkin JSON formats, for tests that check
// that the same traces read from OTLP, Jaeger JSON and Zipkin JSON give the same analysis. It
// follows what the OpenTelemetry Collector's Jaeger and Zipkin translators write for an OTLP span
// (status and kind as tags, links as FOLLOWS_FROM references, event attributes lost in Zipkin), so
// the tests exercise the readers on what those tools produce.
package foreigntest

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

type jaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func jaegerTagOf(a spans.Attr) jaegerTag {
	switch a.Type {
	case spans.ValueInt:
		return jaegerTag{a.Key, "int64", a.Num}
	case spans.ValueDouble:
		return jaegerTag{a.Key, "float64", a.Float()}
	case spans.ValueBool:
		return jaegerTag{a.Key, "bool", a.Num != 0}
	}
	return jaegerTag{a.Key, "string", a.AsString()}
}

func resourceTags(r *spans.Resource) []jaegerTag {
	tags := []jaegerTag{}
	if r == nil {
		return tags
	}
	if r.ServiceInstance != "" {
		tags = append(tags, jaegerTag{spans.AttrServiceInstance, "string", r.ServiceInstance})
	}
	for _, a := range r.Attrs {
		tags = append(tags, jaegerTagOf(a))
	}
	return tags
}

// statusTags are the tags the translators write for a status.
func statusTags(s *spans.Span) [][2]string {
	var out [][2]string
	switch s.Status {
	case spans.StatusError:
		out = append(out, [2]string{"otel.status_code", "ERROR"}, [2]string{"error", "true"})
	case spans.StatusOK:
		out = append(out, [2]string{"otel.status_code", "OK"})
	}
	if s.StatusMessage != "" {
		out = append(out, [2]string{"otel.status_description", s.StatusMessage})
	}
	return out
}

func micros(ns int64) int64 { return ns / 1000 }

// Jaeger writes the spans as the Jaeger query service's JSON, {"data":[trace...]}, one trace per
// trace id in order of first appearance, each with its processes table.
func Jaeger(all []spans.Span) []byte {
	type process struct {
		ServiceName string      `json:"serviceName"`
		Tags        []jaegerTag `json:"tags"`
	}
	type ref struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	type log struct {
		Timestamp int64       `json:"timestamp"`
		Fields    []jaegerTag `json:"fields"`
	}
	type span struct {
		TraceID       string      `json:"traceID"`
		SpanID        string      `json:"spanID"`
		OperationName string      `json:"operationName"`
		References    []ref       `json:"references"`
		StartTime     int64       `json:"startTime"`
		Duration      int64       `json:"duration"`
		Tags          []jaegerTag `json:"tags"`
		Logs          []log       `json:"logs"`
		ProcessID     string      `json:"processID"`
		Warnings      []string    `json:"warnings"`
	}
	type trace struct {
		TraceID   string             `json:"traceID"`
		Spans     []span             `json:"spans"`
		Processes map[string]process `json:"processes"`
		Warnings  []string           `json:"warnings"`
	}
	var traces []*trace
	index := map[spans.TraceID]*trace{}
	procs := map[spans.TraceID]map[*spans.Resource]string{}
	for i := range all {
		s := &all[i]
		t := index[s.TraceID]
		if t == nil {
			t = &trace{TraceID: s.TraceID.String(), Processes: map[string]process{}}
			index[s.TraceID] = t
			procs[s.TraceID] = map[*spans.Resource]string{}
			traces = append(traces, t)
		}
		pid, ok := procs[s.TraceID][s.Resource]
		if !ok {
			pid = fmt.Sprintf("p%d", len(t.Processes)+1)
			procs[s.TraceID][s.Resource] = pid
			t.Processes[pid] = process{ServiceName: s.Service(), Tags: resourceTags(s.Resource)}
		}
		js := span{TraceID: t.TraceID, SpanID: s.SpanID.String(), OperationName: s.Name, References: []ref{},
			StartTime: micros(s.StartUnixNano), Duration: micros(s.EndUnixNano) - micros(s.StartUnixNano), ProcessID: pid, Tags: []jaegerTag{}, Logs: []log{}}
		if !s.ParentID.IsZero() {
			js.References = append(js.References, ref{"CHILD_OF", t.TraceID, s.ParentID.String()})
		}
		for _, l := range s.Links {
			js.References = append(js.References, ref{"FOLLOWS_FROM", l.TraceID.String(), l.SpanID.String()})
		}
		if s.Scope != "" {
			js.Tags = append(js.Tags, jaegerTag{"otel.scope.name", "string", s.Scope})
		}
		for _, a := range s.Attrs {
			js.Tags = append(js.Tags, jaegerTagOf(a))
		}
		if s.Kind != spans.KindUnspecified {
			js.Tags = append(js.Tags, jaegerTag{"span.kind", "string", strings.ToLower(s.Kind.String())})
		}
		for _, kv := range statusTags(s) {
			if kv[0] == "error" {
				js.Tags = append(js.Tags, jaegerTag{"error", "bool", true})
				continue
			}
			js.Tags = append(js.Tags, jaegerTag{kv[0], "string", kv[1]})
		}
		for _, e := range s.Events {
			l := log{Timestamp: micros(e.TimeUnixNano), Fields: []jaegerTag{{"event", "string", e.Name}}}
			for _, a := range e.Attrs {
				l.Fields = append(l.Fields, jaegerTagOf(a))
			}
			js.Logs = append(js.Logs, l)
		}
		t.Spans = append(t.Spans, js)
	}
	doc := map[string]any{"data": traces, "total": 0, "limit": 0, "offset": 0, "errors": nil}
	if traces == nil {
		doc["data"] = []*trace{}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // only plain values: cannot fail
	}
	return out
}

// ZipkinOptions say how to write Zipkin JSON.
type ZipkinOptions struct {
	// Shared writes each SERVER span whose parent is a CLIENT span of the same trace as B3 shared
	// instrumentation does: with the client's span id and "shared": true, its children naming
	// that id as their parent.
	Shared bool
}

// Zipkin writes the spans as Zipkin v2 JSON, an array of spans. With Shared, renamed maps each
// SERVER span id that took its client's id to that client's id.
func Zipkin(all []spans.Span, opt ZipkinOptions) (doc []byte, renamed map[spans.SpanID]spans.SpanID) {
	type endpoint struct {
		ServiceName string `json:"serviceName,omitempty"`
	}
	type annotation struct {
		Timestamp int64  `json:"timestamp"`
		Value     string `json:"value"`
	}
	type span struct {
		TraceID       string            `json:"traceId"`
		ID            string            `json:"id"`
		ParentID      string            `json:"parentId,omitempty"`
		Name          string            `json:"name,omitempty"`
		Kind          string            `json:"kind,omitempty"`
		Timestamp     int64             `json:"timestamp"`
		Duration      int64             `json:"duration"`
		LocalEndpoint *endpoint         `json:"localEndpoint,omitempty"`
		Annotations   []annotation      `json:"annotations,omitempty"`
		Tags          map[string]string `json:"tags,omitempty"`
		Shared        bool              `json:"shared,omitempty"`
	}
	type key struct {
		t  spans.TraceID
		id spans.SpanID
	}
	byID := map[key]*spans.Span{}
	for i := range all {
		byID[key{all[i].TraceID, all[i].SpanID}] = &all[i]
	}
	renamed = map[spans.SpanID]spans.SpanID{}
	if opt.Shared {
		for i := range all {
			s := &all[i]
			if p := byID[key{s.TraceID, s.ParentID}]; s.Kind == spans.KindServer && p != nil && p.Kind == spans.KindClient {
				renamed[s.SpanID] = p.SpanID
			}
		}
	}
	out := make([]span, 0, len(all))
	for i := range all {
		s := &all[i]
		z := span{TraceID: s.TraceID.String(), ID: s.SpanID.String(), Name: s.Name,
			Timestamp: micros(s.StartUnixNano), Duration: micros(s.EndUnixNano) - micros(s.StartUnixNano), Tags: map[string]string{}}
		if !s.ParentID.IsZero() {
			z.ParentID = s.ParentID.String()
		}
		if to, ok := renamed[s.SpanID]; ok {
			z.ID, z.Shared = to.String(), true
			z.ParentID = ""
			if p := byID[key{s.TraceID, s.ParentID}]; !p.ParentID.IsZero() {
				z.ParentID = p.ParentID.String()
			}
		} else if to, ok := renamed[s.ParentID]; ok {
			z.ParentID = to.String()
		}
		switch s.Kind {
		case spans.KindClient, spans.KindServer, spans.KindProducer, spans.KindConsumer:
			z.Kind = s.Kind.String()
		case spans.KindInternal:
			z.Tags["span.kind"] = "internal"
		}
		if svc := s.Service(); svc != "" {
			z.LocalEndpoint = &endpoint{svc}
		}
		if s.Resource != nil {
			if s.Resource.ServiceInstance != "" {
				z.Tags[spans.AttrServiceInstance] = s.Resource.ServiceInstance
			}
			for _, a := range s.Resource.Attrs {
				z.Tags[a.Key] = a.AsString()
			}
		}
		if s.Scope != "" {
			z.Tags["otel.scope.name"] = s.Scope
		}
		for _, a := range s.Attrs {
			z.Tags[a.Key] = a.AsString()
		}
		for _, kv := range statusTags(s) {
			z.Tags[kv[0]] = kv[1]
		}
		if s.Status == spans.StatusError && s.StatusMessage != "" {
			z.Tags["error"] = s.StatusMessage
		}
		for _, e := range s.Events {
			z.Annotations = append(z.Annotations, annotation{micros(e.TimeUnixNano), e.Name})
		}
		out = append(out, z)
	}
	doc, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	return doc, renamed
}
