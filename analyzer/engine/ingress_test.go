package engine_test

import (
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
)

// envoyServer builds the tags Envoy's tracer sets on the SERVER span of a request it received and
// forwarded to cluster at upstream (host:port), answered with status.
func envoyServer(cluster, upstream, status string) []spans.Attr {
	return []spans.Attr{
		spans.StringAttr("component", "proxy"),
		spans.StringAttr(spans.AttrEnvoyUpstreamCluster, cluster),
		spans.StringAttr(spans.AttrEnvoyUpstreamAddress, upstream),
		spans.StringAttr(spans.AttrLegacyHTTPStatusCode, status),
		spans.StringAttr(spans.AttrEnvoyResponseFlags, "-"),
	}
}

// meshTrace is api (its SERVER span, span 1) calling ratings and then details: meshCalls.
func meshTrace(trace byte, tries int, spawn bool) []spans.Span {
	ss := []spans.Span{sp(trace, 1, 0, spans.KindServer, "api", 0, 400)}
	calls, _ := meshCalls(trace, 2, 1, 1, tries, spawn)
	return append(ss, calls...)
}

// meshCalls is api's calls under span parent, from span id on and from at ms: ratings and then
// details, each answering 503 and retried up to tries times by api's loop, every callee behind an
// inbound sidecar whose service.name is "sidecar" for both (a hand-written Envoy configuration):
// the caller's CLIENT span, the sidecar's SERVER span under it (upstream_cluster local_app,
// upstream_address on loopback), the app's SERVER span under that. With spawn, the sidecar makes
// its own CLIENT span for the hop, the app's SERVER span under it. It returns the next free id.
func meshCalls(trace byte, id, parent int, at int64, tries int, spawn bool) ([]spans.Span, int) {
	var ss []spans.Span
	for _, callee := range []string{"ratings", "details"} {
		for range tries {
			call, side := id, id+1
			ss = append(ss,
				sp(trace, call, parent, spans.KindClient, "api", at, at+20, get("http://"+callee+":9080/x", 503)...),
				sp(trace, side, call, spans.KindServer, "sidecar", at+1, at+19, envoyServer("local_app", "127.0.0.1:9080", "503")...))
			app := side
			id += 2
			if spawn {
				hop := named(sp(trace, id, side, spans.KindClient, "sidecar", at+2, at+18,
					spans.StringAttr(spans.AttrEnvoyUpstreamCluster, "local_app"),
					spans.StringAttr(spans.AttrEnvoyUpstreamAddress, "127.0.0.1:9080"),
					spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "503"),
					spans.StringAttr(spans.AttrEnvoyResponseFlags, "-")), "router local_app egress")
				ss = append(ss, hop)
				app = id
				id++
			}
			ss = append(ss, sp(trace, id, app, spans.KindServer, callee, at+3, at+17, server(503)...))
			id++
			at += 25
		}
	}
	return ss, id
}

// Two callees behind sidecars that share one service.name are two dependencies, each named after
// its app and with its own figures - not one "sidecar" dependency with both callees' calls.
func TestIngressSidecarNamesTheAppBehindIt(t *testing.T) {
	for _, spawn := range []bool{false, true} {
		_, r := run(t, engine.Config{}, meshTrace(1, 3, spawn)...)
		for _, dep := range []string{"ratings", "details"} {
			d := depStats(t, r, dep)
			if d.PhysicalCalls != 3 || d.LogicalOperations != 1 || d.Service != dep {
				t.Errorf("spawn %v: %s = %+v, want %s saw 3 for 1", spawn, dep, d, dep)
			}
			if len(d.Callers) != 1 || d.Callers[0] != "api" {
				t.Errorf("spawn %v: %s callers = %v, want api alone (the sidecar's hop is no call)", spawn, dep, d.Callers)
			}
		}
		if len(r.Dependencies) != 2 {
			t.Errorf("spawn %v: dependencies = %+v, want ratings and details only", spawn, r.Dependencies)
		}
	}
}

// Under a retrying caller above api, the sidecar's inbound hop (with spawn_upstream_span, a CLIENT
// span of its own) is no layer: edge x2 times api x3 is 6 calls to ratings from two layers.
func TestIngressSidecarHopIsNoLayer(t *testing.T) {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "edge", 0, 900)}
	id := 2
	for e := range 2 {
		base := int64(e * 450)
		call, api := id, id+1
		ss = append(ss,
			sp(1, call, 1, spans.KindClient, "edge", base+1, base+440, get("http://api:8080/items", 503)...),
			sp(1, api, call, spans.KindServer, "api", base+2, base+439, server(503)...))
		var calls []spans.Span
		calls, id = meshCalls(1, id+2, api, base+3, 3, true)
		ss = append(ss, calls...)
	}
	_, r := run(t, engine.Config{}, ss...)
	d := depStats(t, r, "ratings")
	if d.PhysicalCalls != 6 || d.LogicalOperations != 1 {
		t.Fatalf("ratings = %+v, want 6 calls for 1 intent", d)
	}
	var found bool
	for _, f := range findingsOf(r, "retry-amplification") {
		if f.Dependency != "ratings" {
			continue
		}
		found = true
		if got := f.Evidence["factor"].String(); got != "6" {
			t.Errorf("factor = %s, want 6", got)
		}
		if !strings.Contains(f.Summary, "edge x2, api x3") || strings.Contains(f.Summary, "sidecar") {
			t.Errorf("summary %q: want the layers edge x2, api x3 and no sidecar layer", f.Summary)
		}
	}
	if !found {
		t.Fatalf("no retry-amplification finding for ratings: %+v", r.Findings)
	}
}

// A gateway routes to other hosts: its upstream address is not its own host's and its cluster is
// no inbound one, so it is a hop of its own and keeps its name; a sidecar whose app exports
// nothing keeps its own name too, there being nothing else to name the callee by.
func TestProxyServerSpanKeepsItsNameWhenNotTheCalleesSidecar(t *testing.T) {
	cases := []struct {
		name      string
		cluster   string
		upstream  string
		appTraced bool
		want      string
	}{
		{"gateway", "frontend", "10.0.0.7:8080", true, "front-proxy"},
		{"istio gateway", "outbound|8080||frontend.default.svc.cluster.local", "10.0.0.7:8080", true, "front-proxy"},
		{"sidecar of an untraced app", "local_app", "127.0.0.1:8080", false, "front-proxy"},
		{"istio inbound", "inbound|8080||", "10.0.0.7:8080", true, "frontend"},
		// A port the Service does not declare goes through Istio's inbound passthrough cluster
		// (one per IP family before Istio 1.23, one since), to the app on the pod's address.
		{"istio inbound passthrough", "InboundPassthroughClusterIpv4", "10.0.0.7:8080", true, "frontend"},
		{"istio inbound passthrough, one cluster", "InboundPassthroughCluster", "10.0.0.7:8080", true, "frontend"},
		{"istio outbound passthrough", "PassthroughCluster", "10.0.0.7:8080", true, "front-proxy"},
	}
	for _, tc := range cases {
		ss := []spans.Span{
			sp(1, 1, 0, spans.KindServer, "web", 0, 100),
			sp(1, 2, 1, spans.KindClient, "web", 1, 50, get("http://front:8080/x", 200)...),
			sp(1, 3, 2, spans.KindServer, "front-proxy", 2, 49, envoyServer(tc.cluster, tc.upstream, "200")...),
		}
		if tc.appTraced {
			ss = append(ss, sp(1, 4, 3, spans.KindServer, "frontend", 3, 48, server(200)...))
		}
		_, r := run(t, engine.Config{}, ss...)
		if len(r.Dependencies) != 1 || r.Dependencies[0].Dependency != tc.want {
			t.Errorf("%s: dependencies = %+v, want %s only", tc.name, r.Dependencies, tc.want)
		}
	}
}

// The caller stops waiting (its span ends with no answer) while the app behind the callee's
// sidecar works on and calls its database: the give-up is seen through the sidecar, and the late
// call is the app's.
func TestIngressSidecarKeepsTheAppsWorkAfterGiveUp(t *testing.T) {
	for _, spawn := range []bool{false, true} {
		ss := []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 100),
			sp(1, 2, 1, spans.KindClient, "api", 1, 30, spans.StringAttr(spans.AttrHTTPMethod, "GET"),
				spans.StringAttr(spans.AttrURLFull, "http://ratings:9080/x")),
			// The sidecar's span ends when api hung up (DC); the app goes on.
			sp(1, 3, 2, spans.KindServer, "sidecar", 2, 31,
				spans.StringAttr(spans.AttrEnvoyUpstreamCluster, "local_app"),
				spans.StringAttr(spans.AttrEnvoyUpstreamAddress, "127.0.0.1:9080"),
				spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "0"),
				spans.StringAttr(spans.AttrEnvoyResponseFlags, "DC")),
		}
		app := 3
		if spawn {
			ss = append(ss, sp(1, 4, 3, spans.KindClient, "sidecar", 2, 31,
				spans.StringAttr(spans.AttrEnvoyUpstreamCluster, "local_app"),
				spans.StringAttr(spans.AttrEnvoyResponseFlags, "DC")))
			app = 4
		}
		ss = append(ss,
			sp(1, 5, app, spans.KindServer, "ratings", 3, 90, server(200)...),
			sp(1, 6, 5, spans.KindClient, "ratings", 60, 70, get("http://db:5432/q", 200)...),
		)
		_, r := run(t, engine.Config{}, ss...)
		late := findingsOf(r, "post-deadline-work")
		if len(late) != 1 || late[0].Service != "ratings" {
			t.Errorf("spawn %v: post-deadline-work = %+v, want one naming ratings", spawn, late)
		}
	}
}

// The callee's own sidecar times the app out (its route's timeout: 504, response_flags UT) and
// answers the caller, while the app works on and calls its database: that work is for nobody,
// whether or not the sidecar traced its hop to the app.
func TestIngressSidecarTimeoutLeavesTheAppsWorkForNobody(t *testing.T) {
	for _, spawn := range []bool{false, true} {
		ut := []spans.Attr{
			spans.StringAttr(spans.AttrEnvoyUpstreamCluster, "local_app"),
			spans.StringAttr(spans.AttrEnvoyUpstreamAddress, "127.0.0.1:9080"),
			spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "504"),
			spans.StringAttr(spans.AttrEnvoyResponseFlags, "UT"),
		}
		ss := []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 100),
			sp(1, 2, 1, spans.KindClient, "api", 1, 32, get("http://ratings:9080/x", 504)...),
			sp(1, 3, 2, spans.KindServer, "sidecar", 2, 31, ut...),
		}
		app := 3
		if spawn {
			ss = append(ss, sp(1, 4, 3, spans.KindClient, "sidecar", 2, 31, ut...))
			app = 4
		}
		ss = append(ss,
			sp(1, 5, app, spans.KindServer, "ratings", 3, 90, server(200)...),
			sp(1, 6, 5, spans.KindClient, "ratings", 60, 70, get("http://db:5432/q", 200)...),
		)
		_, r := run(t, engine.Config{}, ss...)
		late := findingsOf(r, "post-deadline-work")
		if len(late) != 1 || late[0].Service != "ratings" || late[0].Dependency != "db" {
			t.Errorf("spawn %v: post-deadline-work = %+v, want one naming ratings and its call to db", spawn, late)
		}
		if d := depStats(t, r, "ratings"); d.PhysicalCalls != 1 {
			t.Errorf("spawn %v: ratings = %+v, want 1 call", spawn, d)
		}
	}
}

// A request resent below the instrumentation (one CLIENT span, three SERVER spans of the callee's
// sidecar under it, each with the app's under it) is an untraced layer whose calls reached the
// app: named ratings, not after the sidecar.
func TestIngressSidecarBelowAnUntracedHopNamesTheApp(t *testing.T) {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "api", 0, 100),
		sp(1, 2, 1, spans.KindClient, "api", 1, 80, get("http://ratings:9080/x", 503)...),
	}
	for n := range 3 {
		at := int64(2 + n*25)
		ss = append(ss,
			sp(1, 10+n, 2, spans.KindServer, "sidecar", at, at+20, envoyServer("local_app", "127.0.0.1:9080", "503")...),
			sp(1, 20+n, 10+n, spans.KindServer, "ratings", at+1, at+19, server(503)...))
	}
	_, r := run(t, engine.Config{}, ss...)
	d := depStats(t, r, "ratings")
	if d.PhysicalCalls != 3 || d.LogicalOperations != 1 {
		t.Errorf("ratings = %+v, want 3 calls for 1 intent", d)
	}
	if len(r.Dependencies) != 1 {
		t.Errorf("dependencies = %+v, want ratings only", r.Dependencies)
	}
}

// Envoy's router before spawn_upstream_span (start_child_span) gave its hop span the kind of the
// connection manager's spans: SERVER on an inbound listener. The app under it is still the callee.
func TestIngressSidecarOldStyleHopSpan(t *testing.T) {
	ss := meshTrace(1, 1, true)
	for i := range ss {
		if ss[i].Name == "router local_app egress" {
			ss[i].Kind = spans.KindServer
		}
	}
	_, r := run(t, engine.Config{}, ss...)
	for _, dep := range []string{"ratings", "details"} {
		if d := depStats(t, r, dep); d.PhysicalCalls != 1 || len(d.Callers) != 1 || d.Callers[0] != "api" {
			t.Errorf("%s = %+v, want 1 call from api", dep, d)
		}
	}
	if len(r.Dependencies) != 2 {
		t.Errorf("dependencies = %+v, want ratings and details only", r.Dependencies)
	}
}

// An Istio sidecar's outbound spans share its inbound ones' service.name. When the app passes the
// trace context on without a span of its own (Istio's sample apps copy the headers), its call's
// outbound sidecar span lands under the inbound sidecar span: a call of its own, toward another
// cluster - not the sidecar's hop to its app. Whether the app is traced or not, both calls stay.
func TestIngressSidecarOutboundSpanIsACallNotTheHop(t *testing.T) {
	for _, traced := range []bool{false, true} {
		ss := []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 100),
			sp(1, 2, 1, spans.KindClient, "api", 1, 90, get("http://details:9080/x", 200)...),
			sp(1, 3, 2, spans.KindServer, "details.default", 2, 89, envoyServer("inbound|9080||", "10.0.0.5:9080", "200")...),
			sp(1, 4, 3, spans.KindClient, "details.default", 10, 60,
				envoyServer("outbound|9080||reviews.default.svc.cluster.local", "10.0.0.9:9080", "200")...),
			sp(1, 5, 4, spans.KindServer, "reviews.default", 11, 59, envoyServer("inbound|9080||", "10.0.0.9:9080", "200")...),
			sp(1, 6, 5, spans.KindServer, "reviews", 12, 58, server(200)...),
		}
		first := "details.default" // an untraced app: its sidecar's name is all there is
		if traced {
			ss = append(ss, sp(1, 7, 3, spans.KindServer, "details", 3, 88, server(200)...))
			first = "details"
		}
		_, r := run(t, engine.Config{}, ss...)
		d := depStats(t, r, first)
		if d.PhysicalCalls != 1 || len(d.Callers) != 1 || d.Callers[0] != "api" {
			t.Errorf("traced %v: %s = %+v, want one call from api", traced, first, d)
		}
		d = depStats(t, r, "reviews")
		if d.PhysicalCalls != 1 || len(d.Callers) != 1 || d.Callers[0] != "details.default" {
			t.Errorf("traced %v: reviews = %+v, want one call from details' sidecar (the app's call)", traced, d)
		}
		if len(r.Dependencies) != 2 {
			t.Errorf("traced %v: dependencies = %+v, want %s and reviews", traced, r.Dependencies, first)
		}
	}
}
