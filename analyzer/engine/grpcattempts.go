package engine

import (
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// The rules in this file read a call made in two levels of spans: one span for the call as the
// application made it, and one child per attempt the client library sent on the wire. gRPC's own
// OpenTelemetry tracing does this in every language that implements it (gRFC A72: grpc-go's
// stats/opentelemetry, grpc-java, grpc-core): a CLIENT span "Sent.<service>.<method>" for the
// call, an INTERNAL child "Attempt.<service>.<method>" per attempt (with previous-rpc-attempts and
// transparent-retry), and the callee's SERVER span "Recv.<service>.<method>" under each attempt.
//
// The rule follows from who made which span: the callee's SERVER span is a child of the span
// whose context went out with the request, so a span that has SERVER children sent the request
// itself - it is the physical call, whatever its kind. Under a CLIENT span of its own service it
// is an attempt of that call: it is read as a call, and the CLIENT span above it becomes the
// wrapper that inference already knows (two instrumentations at two levels: the children are the
// physical calls and the attempts, the wrapper is the operation above them). The attempts then
// form the library's retry layer, which multiplies with the layers above and below it like any
// other.
//
// A72's spans carry no rpc.* attribute, and no gRPC status code: the method is read from the span
// name the convention fixes (the method's full name with '/' made '.'), the dependency is named by
// the gRPC service ("grpc://" + service), and an attempt that the callee answered with an error
// is counted under the status "error" rather than as a connect error (it reached the callee; its
// code was not recorded).

// attemptMark marks an attempt span in the index's Call while inference reads the spans, before
// it is given its call's index.
const attemptMark = -2

// attemptParent is the CLIENT span that span i is an attempt of, -1 when i is none: i is neither a
// CLIENT nor a SERVER span, its parent is a CLIENT span of the same service, and it either sent a
// request itself (a SERVER span is its child) or numbers itself as an attempt (gRPC's
// previous-rpc-attempts). Spans an HTTP client library makes under its CLIENT span for DNS,
// connect or TLS have neither. The cost for other spans is a kind check and a parent lookup.
func (t *trace) attemptParent(i int, k *known) int32 {
	s := &t.Spans[i]
	if s.Kind == spans.KindClient || s.Kind == spans.KindServer || s.Kind == spans.KindProducer || s.Kind == spans.KindConsumer {
		return -1
	}
	p := t.Index().Parent[i]
	if p < 0 || t.Spans[p].Kind != spans.KindClient || t.Spans[p].Service() != s.Service() {
		return -1
	}
	if k.intOr(wkGRPCAttemptPrevious) >= 0 {
		return p
	}
	for _, ch := range t.Children(i) {
		if t.Spans[ch].Kind == spans.KindServer {
			return p
		}
	}
	return -1
}

// fillCallNames gives a call whose span states no destination one from what is known: an attempt
// span takes its call's (the CLIENT span above it), and a span named by gRFC A72's convention
// takes the gRPC method in its name. It also counts an attempt the callee answered with an error
// under "error" (see the file's comment). parent is the CLIENT span the call is an attempt of, -1
// for none.
func (t *trace) fillCallNames(c *callInfo, parent int32, in *interner, sc *scratch) {
	if parent >= 0 {
		pk := &sc.known[parent]
		if c.origin == "" {
			c.origin = in.origin(pk, &sc.derived)
		}
		if c.target == "" {
			c.target = in.target(pk, &sc.derived)
		}
		if c.dep == "" {
			c.dep = pk.str(wkRPCService)
		}
	}
	named := false
	if c.origin == "" || c.target == "" {
		if svc, method := a72Method(t.Spans[c.idx].Name); svc != "" {
			named = true
			if c.origin == "" {
				c.origin = "grpc://" + svc
			}
			if c.target == "" {
				c.target = svc + "/" + method
			}
		}
	}
	if (parent >= 0 || named) && c.status == "" && c.servers > 0 && c.outcome == analyzer.OutcomeRetryable {
		c.status = "error"
	}
}

// a72Method reads the gRPC service and method out of a span name made by gRFC A72's convention:
// "Sent.", "Attempt." or "Recv.", then the method's full name with its '/' made '.'
// ("Sent.grpc.health.v1.Health.Check": service grpc.health.v1.Health, method Check). It returns
// empty strings for any other name.
func a72Method(name string) (service, method string) {
	var rest string
	switch {
	case strings.HasPrefix(name, "Sent."):
		rest = name[len("Sent."):]
	case strings.HasPrefix(name, "Attempt."):
		rest = name[len("Attempt."):]
	case strings.HasPrefix(name, "Recv."):
		rest = name[len("Recv."):]
	default:
		return "", ""
	}
	dot := strings.LastIndexByte(rest, '.')
	if dot <= 0 || dot == len(rest)-1 || strings.ContainsAny(rest, " /") {
		return "", ""
	}
	return rest[:dot], rest[dot+1:]
}
