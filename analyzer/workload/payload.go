package workload

import (
	"fmt"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

// PayloadTrace is trace n of traffic shaped like the end-to-end benchmark's payload: ten spans of a retrying caller, SERVER and CLIENT in turn, ten attributes each,
// unique URLs and paths, one operation id per trace, starting n ms after t0. Its strings are made
// afresh, as a decoder's alias each request; keys are the spans package's constants.
func PayloadTrace(n int, t0 int64) []spans.Span {
	ss := make([]spans.Span, 0, 10)
	res := &spans.Resource{ServiceName: "checkout", ServiceInstance: "checkout-7d9f8b6c5-x2x4q",
		Attrs: []spans.Attr{spans.StringAttr("host.name", "node-17")}}
	var tid spans.TraceID
	for k := range 8 {
		tid[k] = byte(n >> (8 * k))
	}
	tid[15] = 2
	sid := func(i int) spans.SpanID { return spans.SpanID{byte(i + 1), byte(n), byte(n >> 8), byte(n >> 16), 0xee} }
	opID := fmt.Sprintf("%08x-7d3c-4b1a-9e2f-%012x", n*7919, n*104729)
	at := t0 + int64(n)*1_000_000
	for i := range 10 {
		item := (n*10 + i) * 7919 % 1_000_000
		s := spans.Span{TraceID: tid, SpanID: sid(i), StartUnixNano: at + int64(i)*1000, EndUnixNano: at + int64(i)*1000 + 43_210_987,
			Resource: res, Scope: "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"}
		if i > 0 {
			s.ParentID = sid((i - 1) / 2 * 2)
		}
		if i%2 == 1 {
			s.Name, s.Kind, s.Status, s.StatusMessage = "GET inventory", spans.KindClient, spans.StatusError, "503 Service Unavailable"
			s.Attrs = []spans.Attr{
				spans.StringAttr(spans.AttrHTTPMethod, "GET"),
				spans.StringAttr(spans.AttrServerAddress, "inventory.shop.svc.cluster.local"),
				spans.IntAttr(spans.AttrServerPort, 8080),
				spans.StringAttr(spans.AttrURLFull, fmt.Sprintf("http://inventory.shop.svc.cluster.local:8080/api/v1/inventory/items/%06d?fields=price,stock,warehouse&currency=EUR", item)),
				spans.IntAttr(spans.AttrHTTPStatus, 503),
				spans.StringAttr(spans.AttrErrorType, "503"),
				spans.StringAttr(spans.AttrOpID, strings.Clone(opID)),
				spans.IntAttr(spans.AttrAttempt, int64(i/2%3+1)),
				spans.StringAttr(spans.AttrAttemptKind, "retry"),
				spans.StringAttr(spans.AttrOutcome, "retryable"),
			}
		} else {
			s.Name, s.Kind = "GET /api/v1/inventory/items/{id}", spans.KindServer
			s.Attrs = []spans.Attr{
				spans.StringAttr(spans.AttrHTTPMethod, "GET"),
				spans.StringAttr(spans.AttrHTTPRoute, "/api/v1/inventory/items/{id}"),
				spans.StringAttr(spans.AttrURLPath, fmt.Sprintf("/api/v1/inventory/items/%06d", item)),
				spans.StringAttr(spans.AttrURLScheme, "http"),
				spans.IntAttr(spans.AttrHTTPStatus, 200),
				spans.StringAttr(spans.AttrServerAddress, "inventory.shop.svc.cluster.local"),
				spans.IntAttr(spans.AttrServerPort, 8080),
				spans.StringAttr(spans.AttrNetworkPeerAddress, "10.42.17.203"),
				spans.StringAttr("user_agent.original", "Go-http-client/1.1 (stormwatch-reference/0.1; checkout-7d9f8b6c5-x2x4q)"),
				spans.StringAttr(spans.AttrOpID, strings.Clone(opID)),
			}
		}
		ss = append(ss, s)
	}
	return ss
}
