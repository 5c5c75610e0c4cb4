package engine

import (
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/internal/loopback"
	"github.com/stormwatch/stormwatch/spans"
)

// Outcomes and callees as proxies and pre-OpenTelemetry tracers write them. Envoy's tracer (and
// Istio and the gateways built on it) tags its spans with strings: http.status_code "503", or "0"
// when no response came; error "true" on a 5xx or on no response; response_flags, the access
// log's short flags ("UT" upstream request timeout, "UO" upstream overflow - the circuit breaker,
// "DC" downstream connection termination, "-" none); upstream_cluster naming the callee; and, on
// the per-try span the router spawns under the request's span, retry.count (tries before this
// one). OpenTracing and Zipkin mark failure with the error tag and name the callee with
// peer.service. None of it is required; each is read where semconv's own attributes are absent.

// noAnswer is the status text with Envoy's "0" (no response was received) read as no status.
func noAnswer(status string) string {
	if status == "0" {
		return ""
	}
	return status
}

// errorTag reports whether the span carries the OpenTracing error tag set to true (a bool, or
// the string "true" as Envoy and the Zipkin model write it).
func (k *known) errorTag() bool {
	a, ok := k.attr(wkLegacyError)
	if !ok {
		return false
	}
	if a.Type == spans.ValueBool {
		return a.Num != 0
	}
	return strings.EqualFold(a.AsString(), "true")
}

// proxyOutcome is the outcome a proxy's response_flags say, "" when they say nothing the status
// does not: an upstream timeout is a timeout whatever status the proxy answered with (504, or
// none); an overflow refused by the proxy's circuit breaker is a refusal; a downstream that hung
// up before any answer cancelled the call.
func (k *known) proxyOutcome(status string) string {
	if !k.has(wkResponseFlags) {
		return ""
	}
	flags := k.str(wkResponseFlags)
	switch {
	case hasFlag(flags, "UT"):
		return analyzer.OutcomeTimeout
	case hasFlag(flags, "UO") && (status == "" || status == "503"):
		return analyzer.OutcomeRefused
	case hasFlag(flags, "DC") && status == "":
		return analyzer.OutcomeCancelled
	}
	return ""
}

// hasFlag reports whether the comma-separated response flags hold flag.
func hasFlag(flags, flag string) bool {
	for flags != "" {
		f := flags
		if j := strings.IndexByte(flags, ','); j >= 0 {
			f, flags = flags[:j], flags[j+1:]
		} else {
			flags = ""
		}
		if strings.TrimSpace(f) == flag {
			return true
		}
	}
	return false
}

// calleeName is what a call's own span says the callee is called when no SERVER span of the
// callee is there: a proxy's upstream_cluster, else the tracer's peer.service.
func (k *known) calleeName() string {
	if u := k.str(wkUpstreamCluster); u != "" {
		return u
	}
	return k.str(wkPeerService)
}

// retryCount is how many tries of the request came before this one, where a proxy's per-try
// span says so (retry.count, set from the second try on); -1 when absent.
func (k *known) retryCount() int64 { return k.headerInt(wkRetryCount) }

// inheritProxyTries gives a CLIENT span that names no request of its own the request of the
// CLIENT span it runs under. A proxy that retries spawns one span per try under the span of the
// request it was asked to forward (Envoy's "router CLUSTER egress" under its egress span), and
// tags the try with the upstream it chose and the answer, not with the method, URL or an address
// the analyzer reads: they are the parent's. A span that names an address stays its own request. Read so, the tries are the physical calls of one destination under the request
// span, which stays the operation above them (two instrumentations at two levels), and their
// order is retry.count's. kn indexes every span's attributes.
func (t *trace) inheritProxyTries(kn []known) {
	for k := range t.calls {
		c := &t.calls[k]
		if c.target != "" {
			continue
		}
		p := t.Index().Parent[c.idx]
		if !t.isKind(p, spans.KindClient) || t.Index().Call[p] < 0 {
			continue
		}
		pc := &t.calls[t.Index().Call[p]]
		if pc.target == "" || kn[c.idx].origin() != "" {
			// A call with an address of its own (a database client under an HTTP call, say) is
			// a request of its own, whatever it leaves unnamed.
			continue
		}
		// Its origin was made up from its callee's name or its own span name.
		c.target, c.origin, c.originHost = pc.target, pc.origin, pc.originHost
	}
}

// A callee's own sidecar traces the request too. In a mesh (Istio, Consul, or plain Envoy beside
// each app) the callee's inbound sidecar makes a SERVER span for the request it receives (Envoy's
// "ingress" operation; Istio's decorator names it after the host) with upstream_cluster naming
// where it forwards - Istio's inbound cluster "inbound|PORT||", or whatever the configuration calls
// the local app ("local_app") - and upstream_address the app's address. The app's SERVER span is
// that span's child, or, with spawn_upstream_span, the child of the sidecar's own CLIENT span for
// the hop ("router CLUSTER egress"). The sidecar's service.name is its own: one name for every
// sidecar of a hand-written configuration ("envoy", "sidecar"), so naming the dependency after it
// would merge different callees. A gateway (a front proxy, Istio's ingress gateway) also makes a
// SERVER span with upstream_cluster, but it routes to other hosts: its upstream cluster is an
// outbound one and its upstream address is not its own host's, and it stays a hop of its own.

// ingressApp is the app's SERVER span behind srv when srv is a callee's inbound sidecar span, -1
// otherwise: srv is a SERVER span with Envoy's upstream_cluster and response_flags, its upstream is
// the app beside it (an Istio inbound cluster, or a loopback upstream_address on srv or on its own
// upstream span), and the app's SERVER span is under it (the earliest, when the sidecar tried the
// app more than once). A sidecar whose app exports nothing keeps its own name: -1. The answer is
// kept in kn: the tree does not change once built, and a wide sidecar span would otherwise be
// walked once per call under it.
func (t *trace) ingressApp(srv int32, kn []known) int32 {
	if m := kn[srv].ingress; m != 0 {
		return m - 2
	}
	app := t.findIngressApp(srv, kn)
	kn[srv].ingress = app + 2
	return app
}

// findIngressApp is ingressApp, worked out. A SERVER span under the sidecar's that is a proxy's
// too (Envoy's tags on it) is another sidecar - the next service's, reached by an app that passed
// the trace context on without a span of its own - not the app.
func (t *trace) findIngressApp(srv int32, kn []known) int32 {
	if !t.isKind(srv, spans.KindServer) || !kn[srv].has(wkUpstreamCluster) || !kn[srv].has(wkResponseFlags) {
		return -1
	}
	inbound := istioInbound(kn[srv].str(wkUpstreamCluster)) ||
		loopback.Is(t.Spans[srv].Str(spans.AttrEnvoyUpstreamAddress))
	app := int32(-1)
	take := func(s int32) {
		if app < 0 || t.Spans[s].StartUnixNano < t.Spans[app].StartUnixNano {
			app = s
		}
	}
	for _, ch := range t.Children(int(srv)) {
		switch {
		case t.sidecarHop(srv, ch, kn):
			inbound = inbound || loopback.Is(t.Spans[ch].Str(spans.AttrEnvoyUpstreamAddress))
			for _, g := range t.Children(int(ch)) {
				if t.Spans[g].Kind == spans.KindServer && !kn[g].has(wkUpstreamCluster) {
					take(g)
				}
			}
		case t.Spans[ch].Kind == spans.KindServer && !kn[ch].has(wkUpstreamCluster):
			take(ch)
		}
	}
	if !inbound {
		return -1
	}
	return app
}

// serverService is the service SERVER span srv answers for: the app's behind it when srv is the
// callee's own sidecar's span with its app traced (ingressApp), else srv's own service.name.
func (t *trace) serverService(srv int32, kn []known) string {
	if app := t.ingressApp(srv, kn); app >= 0 {
		return t.Spans[app].Service()
	}
	return t.Spans[srv].Service()
}

// sidecarHop reports whether span ch, a child of the proxy's SERVER span srv, is the proxy's own
// span for forwarding that request: the same service, and the same upstream_cluster on it - Envoy
// tags the request's span and its upstream span with the route's cluster. An Istio sidecar's
// outbound spans share its inbound ones' service.name but name an outbound cluster: a span of the
// app's own call that landed under the inbound span (the app passed the context on without a span
// of its own) is a call, not the hop. With
// spawn_upstream_span it is a CLIENT span; the router's older start_child_span gave it the kind of
// the connection manager's spans, SERVER on an inbound listener.
func (t *trace) sidecarHop(srv, ch int32, kn []known) bool {
	k := t.Spans[ch].Kind
	return (k == spans.KindClient || k == spans.KindServer) && kn[ch].has(wkUpstreamCluster) &&
		kn[ch].str(wkUpstreamCluster) == kn[srv].str(wkUpstreamCluster) &&
		t.Spans[ch].Service() == t.Spans[srv].Service()
}

// ingressHop reports whether CLIENT span i is an inbound sidecar's span for handing the request to
// its own app: no call of its own (the request is the caller's call, already counted), no layer.
func (t *trace) ingressHop(i int32, kn []known) bool {
	p := t.Index().Parent[i]
	return p >= 0 && kn[i].has(wkUpstreamCluster) && t.sidecarHop(p, i, kn) && t.ingressApp(p, kn) >= 0
}

// istioInbound reports whether an Envoy cluster is one of Istio's inbound clusters, which forward
// to the app in the sidecar's own pod: "inbound|PORT||" for a port the Service declares, the
// inbound passthrough cluster for any other ("InboundPassthroughClusterIpv4" and "...Ipv6" until
// Istio made them one, "InboundPassthroughCluster"). Its outbound "PassthroughCluster" is not.
func istioInbound(cluster string) bool {
	return strings.HasPrefix(cluster, "inbound|") || strings.HasPrefix(cluster, "InboundPassthroughCluster")
}
