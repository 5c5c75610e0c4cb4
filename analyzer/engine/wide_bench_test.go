package engine_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/spans"
)

// wideShapes are the shapes of one trace where one span has many children or one destination many
// calls: each is where a per-trace pass that compares every child with every earlier one costs the
// square. The analysis of one such trace must grow with its spans (or spans times their log),
// which BenchmarkWideTrace shows at 1k, 10k and 100k siblings.
var wideShapes = []struct {
	name string
	make func(n int) []spans.Span
	// policy is the policy file the shape is analyzed under, "" for the built-in one.
	policy string
}{
	// A CLIENT span with n SERVER children: a Zipkin shared span, a proxy that resends, a hostile
	// batch. Every child from one instance, one after the other (resends), then from n instances.
	{"client-servers", func(n int) []spans.Span { return clientServers(n, 1) }, ""},
	{"client-servers-instances", func(n int) []spans.Span { return clientServers(n, n) }, ""},
	// n SERVER children under one CLIENT span, each from its own service: untraced hops per service.
	{"client-servers-services", func(n int) []spans.Span {
		ss := clientServers(n, 1)
		for i := 2; i < len(ss); i++ {
			ss[i].Resource = &spans.Resource{ServiceName: "dep-" + strconv.Itoa(i)}
		}
		return ss
	}, ""},
	// n CLIENT siblings toward one destination, and toward n destinations.
	{"client-siblings", func(n int) []spans.Span { return clientSiblings(n, false) }, ""},
	{"client-siblings-origins", func(n int) []spans.Span { return clientSiblings(n, true) }, ""},
	// n INTERNAL siblings of one name with a failing call under each: an application's retry loop
	// as wide as it gets; and of n names (no loop at all).
	{"internal-siblings", func(n int) []spans.Span { return internalSiblings(n, false) }, ""},
	{"internal-siblings-names", func(n int) []spans.Span { return internalSiblings(n, true) }, ""},
	// A callee's inbound sidecar span with n hop spans to its app under it (a sidecar that
	// resends, or a hostile batch): the sidecar rule is asked about the sidecar once per hop.
	{"sidecar-hops", func(n int) []spans.Span {
		ss := []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, 2*int64(n)+10),
			sp(1, 2, 1, spans.KindClient, "api", 1, 2*int64(n)+5, get("http://details:9080/x", 503)...),
			sp(1, 3, 2, spans.KindServer, "sidecar", 2, 2*int64(n)+4, envoyServer("inbound|9080||", "127.0.0.1:9080", "503")...),
		}
		for i := range n {
			ss = append(ss, sp(1, 4+i, 3, spans.KindClient, "sidecar", 3+2*int64(i), 4+2*int64(i),
				envoyServer("inbound|9080||", "127.0.0.1:9080", "503")...))
		}
		return append(ss, sp(1, 4+n, 4, spans.KindServer, "details", 3, 4, server(503)...))
	}, ""},
	// n SERVER spans whose parents never arrived, beside one traced request.
	{"orphans", func(n int) []spans.Span {
		ss := []spans.Span{
			sp(1, 1, 0, spans.KindServer, "api", 0, int64(n)+10),
			sp(1, 2, 1, spans.KindClient, "api", 1, int64(n)+5, get("http://gateway:80/x", 200)...),
		}
		for i := range n {
			ss = append(ss, sp(1, 3+i, 1<<23+i, spans.KindServer, "dep", int64(i)+2, int64(i)+3, server(503)...))
		}
		return ss
	}, ""},
	// n service instances whose clocks are related by a chain of calls, listed leaf first (span
	// ids fall along the chain), beside an orphan: the clock estimate must reach the chain's end
	// in one walk, not one pass per instance. Each instance's CLIENT span hangs under the root, so
	// the trace stays shallow and the chain is only in the clocks.
	{"clock-chain", clockChain, ""},
	// n dark middle services called at once (a scatter-gather), each retrying its own callee after
	// the caller gave up, whose clock no traced call reaches and runs 15-40 ms behind the root's:
	// every such clock is fitted from where its orphans fall (fitUnknownClocks), and no offset puts
	// more than one of them inside a span, up to the orphans a trace attaches.
	{"dark-clocks", darkClocks, ""},
	// A call retried once, under whose every try the callee calls n dependencies of their own,
	// each retried once: n amplified chains, each reported once by the detector that multiplies
	// layers.
	{"amplified-deps", amplifiedDeps, ""},
	// An application loop of n tries, each retrying its one call once: one amplified chain of n
	// leaves, whose layers are read once per leaf.
	{"amplified-loop", amplifiedLoop, ""},
	// n calls to one service sent at once, each to its own replica: one attempt of n origins.
	{"fanout-replicas", fanoutReplicas, ""},
	// A call that failed, then a fallback to another service that calls the failed dependency n
	// times, each for its own path: one finding naming n calls, each of its own operation.
	{"fallback-calls", fallbackCalls, ""},
	// n services, each called once by api, each calling dep: one dependency of n callers, which
	// the cross-trace detectors group by caller.
	{"dep-callers", depCallers, ""},
	// n services, each with a breaker that opened on one dependency's failures and then refused a
	// call to another: a wrongly keyed breaker per caller, judged against the caller's own origins.
	{"breaker-callers", breakerCallers, ""},
	// The combs: n calls nested one in another, each level with a leaf call of its own. Their
	// depth is n, so a pass that walks up from every leaf, or down from every level, costs the
	// square. A recursive service, each level calling leaf twice (503, then 200) before calling
	// itself once more.
	{"comb-services", combServices, ""},
	// One service's INTERNAL spans nested n deep, each calling dep twice (503, then 200) before
	// the next: a deep application stack with a retried call at every level.
	{"comb-internal", combInternal, ""},
	// A recursive service whose every caller gave up (its CLIENT span ended) while the callee
	// worked on and called itself again: a cascade of timeouts n deep, every give-up's late work
	// holding all the give-ups below it.
	{"comb-gave-up", combGaveUp, ""},
	// A recursive service whose every call carries a deadline 1 ms after it starts, each callee
	// calling on 10 ms later: every operation's deadline passed before all the calls below it.
	{"comb-deadlines", combDeadlines, ""},
	// A recursive service whose every level calls its own dep-i (503) and then falls back to
	// calling itself once more: n fallbacks nested, none calling its failed dependency again.
	{"comb-fallbacks", combFallbacks, ""},
	// comb-internal under a root SERVER span with a route, analyzed under a policy with a class
	// matched by that route: every operation's class is looked up by the route of the SERVER span
	// its caller span works for, n levels up for the deepest.
	{"comb-routes", combRoutes, routePolicy},
	// The reference client's fallback branches nested n deep: every level's operation calls dep
	// once (503) and falls back, in an INTERNAL span marked resilience.attempt.kind=fallback, to
	// the next level's operation, which calls dep again: every branch calls the failed dependency
	// once for each level below it.
	{"comb-fallback-branches", combFallbackBranches, ""},
	// A recursive service whose every level calls its own leaf-i twice (503, then 200) and rec
	// twice (503 at once, then the next level): every level retries, so leaf-i's chain has a
	// retrying layer for each level above it, and each of the n chains is reported.
	{"comb-amplified", combAmplified, ""},
	// comb-amplified's levels under each of two tries of one call: every leaf's chain has two
	// copies, whose paths part at the top.
	{"comb-amplified-twice", combAmplifiedTwice, ""},
	// comb-amplified whose calls to rec a proxy below the instrumentation resent: each level's one
	// CLIENT span to rec has two SERVER children (503, then the next level), so every level's
	// retrying layer is an untraced hop whose tries are rec's SERVER spans, and each of the n
	// reported chains has a layer read from them at every level above its leaf.
	{"comb-untraced", combUntraced, ""},
	// comb-untraced's levels under each of two tries of one call: every leaf's chain has two
	// copies, whose paths part at the top.
	{"comb-untraced-twice", combUntracedTwice, ""},
}

// combUntraced is a root SERVER span of api and n levels of rec under it, each level's SERVER
// span (api's for the first) calling leaf-i twice (503, then 200), then rec once: a CLIENT span
// with two SERVER spans of rec under it, a 503 and then the next level.
func combUntraced(n int) []spans.Span {
	end := 6*int64(n) + 10
	return recLevels([]spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}, 1, "api", 2, n, 0, end, true)
}

// combAmplified is a root SERVER span of api and n levels of rec under it, each level's SERVER
// span (api's for the first) calling leaf-i twice (503, then 200), then rec twice: a 503 with no
// SERVER span under it, then the call whose SERVER span is the next level.
func combAmplified(n int) []spans.Span {
	end := 6*int64(n) + 10
	return recLevels([]spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}, 1, "api", 2, n, 0, end, false)
}

// recLevels appends combAmplified's n levels (combUntraced's, untraced) under the span caller of
// svc, five spans a level, their span ids from id on, their times from at on, each level ending a
// millisecond before the one above, the first before end.
func recLevels(ss []spans.Span, caller int, svc string, id, n int, at, end int64, untraced bool) []spans.Span {
	for i := range n {
		at, id, leaf := at+5*int64(i)+1, id+5*i, "http://leaf-"+strconv.Itoa(i)+":80/x"
		ss = append(ss, sp(1, id, caller, spans.KindClient, svc, at, at+1, get(leaf, 503)...),
			sp(1, id+1, caller, spans.KindClient, svc, at+1, at+2, get(leaf, 200)...))
		if untraced {
			ss = append(ss, sp(1, id+2, caller, spans.KindClient, svc, at+2, end-int64(i)-1, get("http://rec:80/x", 200)...),
				sp(1, id+3, id+2, spans.KindServer, "rec", at+2, at+3, server(503)...),
				sp(1, id+4, id+2, spans.KindServer, "rec", at+4, end-int64(i)-1, server(200)...))
		} else {
			ss = append(ss, sp(1, id+2, caller, spans.KindClient, svc, at+2, at+3, get("http://rec:80/x", 503)...),
				sp(1, id+3, caller, spans.KindClient, svc, at+3, end-int64(i)-1, get("http://rec:80/x", 200)...),
				sp(1, id+4, id+3, spans.KindServer, "rec", at+4, end-int64(i)-1, server(200)...))
		}
		caller, svc = id+4, "rec"
	}
	return ss
}

// combAmplifiedTwice is comb-amplified's levels run twice: api calls top twice (503, then 200),
// and each try's SERVER span of top runs n levels, so every leaf-i is called by two copies of its
// operation, whose paths part at the top.
func combAmplifiedTwice(n int) []spans.Span { return levelsTwice(n, false) }

// combUntracedTwice is comb-untraced's levels run twice, as combAmplifiedTwice runs
// comb-amplified's.
func combUntracedTwice(n int) []spans.Span { return levelsTwice(n, true) }

// levelsTwice is a root SERVER span of api calling top twice (503, then 200), each try's SERVER
// span of top running recLevels' n levels.
func levelsTwice(n int, untraced bool) []spans.Span {
	span := 6*int64(n) + 10 // one try's
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 2*span+10)}
	for try := range 2 {
		at, id, status := 1+int64(try)*(span+2), 2+try*(5*n+2), 503+try*(200-503)
		ss = append(ss, sp(1, id, 1, spans.KindClient, "api", at, at+span, get("http://top:80/x", status)...),
			sp(1, id+1, id, spans.KindServer, "top", at, at+span, server(status)...))
		ss = recLevels(ss, id+1, "top", id+2, n, at, at+span, untraced)
	}
	return ss
}

// combFallbackBranches is a root SERVER span of api and n levels under it, each an INTERNAL span
// of the reference client's operation read-i, with its one call to dep (503) and its fallback
// branch, under which the next level is; each level lasts to i ms before the root's end.
func combFallbackBranches(n int) []spans.Span {
	end := 3*int64(n) + 10
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end, server(200)...)}
	parent := 1
	for i := range n {
		at, id, op := 3*int64(i)+1, 2+3*i, "op-"+strconv.Itoa(i)
		ss = append(ss,
			named(sp(1, id, parent, spans.KindInternal, "api", at, end-int64(i)-1,
				spans.StringAttr(spans.AttrOpID, op), spans.StringAttr(spans.AttrOpName, "read-"+strconv.Itoa(i)),
				spans.StringAttr(spans.AttrOwner, "api"), spans.StringAttr(spans.AttrTerminal, "fallback:next")), "read"),
			sp(1, id+1, id, spans.KindClient, "api", at, at+1, append(get("http://dep:80/x", 503),
				spans.StringAttr(spans.AttrOpID, op), spans.IntAttr(spans.AttrAttempt, 1),
				spans.StringAttr(spans.AttrAttemptKind, "initial"), spans.StringAttr(spans.AttrOutcome, "retryable"))...),
			named(sp(1, id+2, id, spans.KindInternal, "api", at+2, end-int64(i)-1,
				spans.StringAttr(spans.AttrOpID, op), spans.StringAttr(spans.AttrAttemptKind, "fallback"),
				spans.StringAttr(spans.AttrTerminal, "fallback:next")), "fallback next"))
		parent = id + 2
	}
	return ss
}

// routePolicy is a policy with a class matched by the route of comb-routes' root span, whose
// declared backoff the findings cite: they show every operation found its class by its route.
const routePolicy = `classes:
  - name: steps
    match:
      route: "/steps"
    maxAttempts: 3
    backoff: {base: 1ms, cap: 10ms, jitter: full}
`

// wideConfig is the analyzer's configuration for a shape: cfg under the shape's policy, if any.
func wideConfig(tb testing.TB, cfg engine.Config, policyYAML string) engine.Config {
	if cfg.Detectors == nil {
		cfg.Detectors = suite.Default()
	}
	if policyYAML != "" {
		p, err := policy.Parse("wide.yaml", []byte(policyYAML), cfg.Detectors)
		if err != nil {
			tb.Fatalf("policy: %v", err)
		}
		policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Offline)
	}
	return cfg
}

// combRoutes is combInternal whose root SERVER span has the route /steps.
func combRoutes(n int) []spans.Span {
	ss := combInternal(n)
	ss[0].Attrs = append(ss[0].Attrs, spans.StringAttr(spans.AttrHTTPRoute, "/steps"))
	return ss
}

// combDeadlines is a root SERVER span of api and n levels of rec under it, each level's SERVER
// span (api's for the first) calling rec with a deadline 1 ms after the call started; the call and
// rec's SERVER span under it last to i ms before the root's end, and rec calls again 10 ms after.
func combDeadlines(n int) []spans.Span {
	end := 11*int64(n) + 10
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}
	caller, svc := 1, "api"
	for i := range n {
		at, id := 10*int64(i)+1, 2+2*i
		attrs := append(get("http://rec:80/x", 200), spans.IntAttr(spans.AttrDeadline, t0+(at+1)*msec))
		ss = append(ss, sp(1, id, caller, spans.KindClient, svc, at, end-int64(i)-1, attrs...),
			sp(1, id+1, id, spans.KindServer, "rec", at, end-int64(i)-1, server(200)...))
		caller, svc = id+1, "rec"
	}
	return ss
}

// combFallbacks is a root SERVER span of api and n levels of rec under it, each level's SERVER
// span (api's for the first) calling dep-i (503) and then rec, whose SERVER span is the next
// level; each call to rec lasts to i ms before the root's end.
func combFallbacks(n int) []spans.Span {
	end := 4*int64(n) + 10
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}
	caller, svc := 1, "api"
	for i := range n {
		at, id := 3*int64(i)+1, 2+3*i
		ss = append(ss, sp(1, id, caller, spans.KindClient, svc, at, at+1, get("http://dep-"+strconv.Itoa(i)+":80/x", 503)...),
			sp(1, id+1, caller, spans.KindClient, svc, at+2, end-int64(i)-1, get("http://rec:80/x", 200)...),
			sp(1, id+2, id+1, spans.KindServer, "rec", at+2, end-int64(i)-1, server(200)...))
		caller, svc = id+2, "rec"
	}
	return ss
}

// combServices is a root SERVER span of api and n levels of rec under it, each level's SERVER
// span (api's for the first) calling leaf twice (503, then 200) and then rec, whose SERVER span is
// the next level. Level i starts at 3i ms and ends i ms before the root.
func combServices(n int) []spans.Span {
	end := 4*int64(n) + 10
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}
	caller, svc := 1, "api"
	for i := range n {
		at, id := 3*int64(i), 2+4*i
		ss = append(ss, sp(1, id, caller, spans.KindClient, svc, at, at+1, get("http://leaf:80/x", 503)...),
			sp(1, id+1, caller, spans.KindClient, svc, at+1, at+2, get("http://leaf:80/x", 200)...),
			sp(1, id+2, caller, spans.KindClient, svc, at+2, end-int64(i)-1, get("http://rec:80/x", 200)...),
			sp(1, id+3, id+2, spans.KindServer, "rec", at+3, end-int64(i)-1, server(200)...))
		caller, svc = id+3, "rec"
	}
	return ss
}

// combInternal is a root SERVER span of api with n INTERNAL spans named step nested under it, each
// calling dep twice (503, then 200) before the next step starts.
func combInternal(n int) []spans.Span {
	end := 4*int64(n) + 10
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}
	parent := 1
	for i := range n {
		at, id := 3*int64(i)+1, 2+3*i
		ss = append(ss, named(sp(1, id, parent, spans.KindInternal, "api", at, end-int64(i)-1), "step"),
			sp(1, id+1, id, spans.KindClient, "api", at, at+1, get("http://dep:80/x", 503)...),
			sp(1, id+2, id, spans.KindClient, "api", at+1, at+2, get("http://dep:80/x", 200)...))
		parent = id
	}
	return ss
}

// combGaveUp is a root SERVER span of api and n levels of rec under it, each level's SERVER span
// (api's for the first) calling rec for 1 ms and giving up (its deadline exceeded), while rec's SERVER span works on
// to i ms before the root's end and calls rec again 100 ms after it started (past the skew
// tolerance): each call after its caller's caller gave up.
func combGaveUp(n int) []spans.Span {
	end := 101*int64(n) + 10
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, end)}
	caller, svc := 1, "api"
	for i := range n {
		at, id := 100*int64(i)+1, 2+2*i
		ss = append(ss, failed(sp(1, id, caller, spans.KindClient, svc, at, at+1, get("http://rec:80/x", 0)...), "context deadline exceeded"),
			sp(1, id+1, id, spans.KindServer, "rec", at, end-int64(i)-1, server(200)...))
		caller, svc = id+1, "rec"
	}
	return ss
}

// breakerCallers is viaServices with svc-i answering 200, having called bad-i (503) and then
// good-i, which its breaker refused.
func breakerCallers(n int) []spans.Span {
	return viaServices(n, 4, 200, func(i, srv int, svc string, at int64) []spans.Span {
		return []spans.Span{
			sp(1, srv+1, srv, spans.KindClient, svc, at, at+1, get("http://bad-"+strconv.Itoa(i)+":80/x", 503)...),
			failed(sp(1, srv+2, srv, spans.KindClient, svc, at+2, at+3, get("http://good-"+strconv.Itoa(i)+":80/x", 0)...), "circuit breaker is open"),
		}
	})
}

// depCallers is viaServices with svc-i answering 503, having called dep once (503).
func depCallers(n int) []spans.Span {
	return viaServices(n, 3, 503, func(_, srv int, svc string, at int64) []spans.Span {
		return []spans.Span{sp(1, srv+1, srv, spans.KindClient, svc, at+1, at+2, get("http://dep:80/x", 503)...)}
	})
}

// viaServices is a root SERVER span of api with n CLIENT children 4 ms apart, each to its own
// service svc-i, lasting stride ms and answered with status by svc-i's SERVER span (id srv), under
// which under puts what svc-i did from at; each child and what is under it take stride span ids.
func viaServices(n, stride, status int, under func(i, srv int, svc string, at int64) []spans.Span) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 4*int64(n)+10)}
	for i := range n {
		at := 1 + 4*int64(i)
		svc := "svc-" + strconv.Itoa(i)
		call, srv := 2+stride*i, 3+stride*i
		ss = append(ss, sp(1, call, 1, spans.KindClient, "api", at, at+int64(stride), get("http://"+svc+":80/x", status)...),
			sp(1, srv, call, spans.KindServer, svc, at, at+int64(stride), server(status)...))
		ss = append(ss, under(i, srv, svc, at)...)
	}
	return ss
}

// amplifiedDeps is a root SERVER span of api calling mid twice (503, then 200), and under each
// of mid's SERVER spans n CLIENT calls at once, each to its own leaf-i and retried once (503,
// then 200).
func amplifiedDeps(n int) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 40)}
	id := 2
	for try := range 2 {
		at := 1 + 15*int64(try)
		status := 503 + int(try)*(200-503)
		call, srv := id, id+1
		ss = append(ss, sp(1, call, 1, spans.KindClient, "api", at, at+12, get("http://mid:80/x", status)...),
			sp(1, srv, call, spans.KindServer, "mid", at+1, at+11, server(status)...))
		id += 2
		for i := range n {
			url := "http://leaf-" + strconv.Itoa(i) + ":80/x"
			ss = append(ss, sp(1, id, srv, spans.KindClient, "mid", at+2, at+4, get(url, 503)...),
				sp(1, id+1, srv, spans.KindClient, "mid", at+5, at+7, get(url, 200)...))
			id += 2
		}
	}
	return ss
}

// amplifiedLoop is a root SERVER span of api with n INTERNAL children of one name one after the
// other (an application loop), each failing after two failed calls to dep.
func amplifiedLoop(n int) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 5*int64(n)+10)}
	for i := range n {
		at := 1 + 5*int64(i)
		in := failed(named(sp(1, 2+3*i, 1, spans.KindInternal, "api", at, at+4), "fetch"), "")
		ss = append(ss, in,
			sp(1, 3+3*i, 2+3*i, spans.KindClient, "api", at, at+1, get("http://dep:80/x", 503)...),
			sp(1, 4+3*i, 2+3*i, spans.KindClient, "api", at+2, at+3, get("http://dep:80/x", 503)...))
	}
	return ss
}

// fanoutReplicas is a root SERVER span of api with n CLIENT children started together, each to
// its own address, each answered by a SERVER span of dep.
func fanoutReplicas(n int) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 10)}
	for i := range n {
		url := fmt.Sprintf("http://10.%d.%d.%d:8080/x", i>>16&255, i>>8&255, i&255)
		ss = append(ss, sp(1, 2+2*i, 1, spans.KindClient, "api", 1, 5, get(url, 200)...),
			sp(1, 3+2*i, 2+2*i, spans.KindServer, "dep", 2, 4, server(200)...))
	}
	return ss
}

// fallbackCalls is a root SERVER span of api whose call to dep fails (503), then a call to
// fallback, whose SERVER span calls dep n times at once, each for a path of its own.
func fallbackCalls(n int) []spans.Span {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "api", 0, 20),
		sp(1, 2, 1, spans.KindClient, "api", 1, 2, get("http://dep:80/x", 503)...),
		sp(1, 3, 1, spans.KindClient, "api", 3, 15, get("http://fallback:80/x", 200)...),
		sp(1, 4, 3, spans.KindServer, "fallback", 4, 14, server(200)...),
	}
	for i := range n {
		ss = append(ss, sp(1, 5+i, 4, spans.KindClient, "fallback", 5, 7, get("http://dep:80/x/"+strconv.Itoa(i), 200)...))
	}
	return ss
}

// darkClocks is a root SERVER span of api with n CLIENT children called at once (starts spread
// over 8 ms), each to a middle service mid-i that exports nothing and calls leaf-i three times,
// 500 ms apart (failing twice), long after api's call to it ended. leaf-i's clock runs 15-40 ms
// behind the root's, so its first orphan seems to start before the root: no traced call reaches
// leaf-i, and its offset is fitted. The orphans' span ids come first, the root's last: a scan of
// the trace for a span that could have called an orphan comes to the orphans first.
func darkClocks(n int) []spans.Span {
	ss := []spans.Span{sp(1, 1<<22, 0, spans.KindServer, "api", 0, 40)}
	for i := range n {
		at := 1 + int64(i%8)
		ss = append(ss, sp(1, 1<<21+i, 1<<22, spans.KindClient, "api", at, at+19, get("http://mid-"+strconv.Itoa(i)+":80/x", 504)...))
		behind := 15 + int64(i*7%26)
		leaf := "leaf-" + strconv.Itoa(i)
		for k := range 3 {
			status := 503
			if k == 2 {
				status = 200
			}
			start := at + 1 + 500*int64(k) - behind
			ss = append(ss, sp(1, 2+3*i+k, 1<<23+3*i+k, spans.KindServer, leaf, start, start+3, server(status)...))
		}
	}
	return ss
}

// clockChain is a root SERVER span of api and, for each instance i < n of dep, a CLIENT span under
// the root calling instance i+1, whose SERVER span answers it (api's CLIENT span stands for
// instance 0's); the SERVER spans' ids run down the chain, so the calls are read leaf first.
// Instance i's clock runs i%7 ms ahead of the root's. An orphan on the last instance is attached
// to the root by its start on the root's clock.
func clockChain(n int) []spans.Span {
	skew := func(i int) int64 { return int64(i % 7) }
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 4*int64(n)+10)}
	for i := range n {
		at := 1 + 2*int64(i)
		c := onInstance(sp(1, 2+i, 1, spans.KindClient, "dep", at+skew(i), at+skew(i)+2, get("http://dep:80/x", 200)...), "dep-"+strconv.Itoa(i))
		if i == 0 {
			c = sp(1, 2, 1, spans.KindClient, "api", at, at+2, get("http://dep:80/x", 200)...)
		}
		ss = append(ss, c, onInstance(sp(1, 1<<22-i, 2+i, spans.KindServer, "dep", at+skew(i+1), at+skew(i+1)+1, server(200)...), "dep-"+strconv.Itoa(i+1)))
	}
	return append(ss, onInstance(sp(1, 1<<22+1, 1<<23, spans.KindServer, "dep", 2, 3, server(200)...), "dep-"+strconv.Itoa(n)))
}

// clientServers is a CLIENT span with n SERVER children from instances instances, one after the other.
func clientServers(n, instances int) []spans.Span {
	ss := []spans.Span{
		sp(1, 1, 0, spans.KindServer, "api", 0, 2*int64(n)+10),
		sp(1, 2, 1, spans.KindClient, "api", 1, 2*int64(n)+5, get("http://mesh:15001/x", 503)...),
	}
	for i := range n {
		s := sp(1, 3+i, 2, spans.KindServer, "dep", 2+2*int64(i), 3+2*int64(i), server(503)...)
		if instances > 1 {
			s = onInstance(s, "dep-"+strconv.Itoa(i%instances))
		}
		ss = append(ss, s)
	}
	return ss
}

// clientSiblings is a SERVER span with n CLIENT children one after the other, toward one
// destination or each toward its own.
func clientSiblings(n int, origins bool) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 2*int64(n)+10)}
	for i := range n {
		url := "http://dep:80/x"
		if origins {
			url = "http://dep-" + strconv.Itoa(i) + ":80/x"
		}
		ss = append(ss, sp(1, 2+i, 1, spans.KindClient, "api", 1+2*int64(i), 2+2*int64(i), get(url, 503)...))
	}
	return ss
}

// internalSiblings is a SERVER span with n INTERNAL children one after the other, each with a
// failing CLIENT call under it; of one name or each of its own.
func internalSiblings(n int, names bool) []spans.Span {
	ss := []spans.Span{sp(1, 1, 0, spans.KindServer, "api", 0, 3*int64(n)+10)}
	for i := range n {
		name := "fetch"
		if names {
			name = "fetch-" + strconv.Itoa(i)
		}
		in := failed(named(sp(1, 2+2*i, 1, spans.KindInternal, "api", 1+3*int64(i), 3+3*int64(i)), name), "")
		ss = append(ss, in, sp(1, 3+2*i, 2+2*i, spans.KindClient, "api", 1+3*int64(i), 2+3*int64(i), get("http://dep:80/x", 503)...))
	}
	return ss
}

// BenchmarkWideTrace analyzes one trace of each wide shape, per span: the figures per span must
// stay flat from 1k to 100k siblings.
func BenchmarkWideTrace(b *testing.B) {
	for _, shape := range wideShapes {
		for _, n := range []int{1_000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("shape=%s/siblings=%d", shape.name, n), func(b *testing.B) {
				if why, ok := stillSquare[shape.name]; ok && n > 10_000 {
					b.Skip("still square: ", why)
				}
				ss := shape.make(n)
				cfg := wideConfig(b, engine.Config{MaxSpans: -1, MaxTraceSpans: -1, WindowInterval: -1}, shape.policy)
				m := startSpanMeter(b)
				for range b.N {
					a := engine.New(cfg)
					batch := &spans.Batch{Spans: append([]spans.Span(nil), ss...)}
					if err := a.ConsumeBatch(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
					a.Flush()
					if r := a.Report(); r.Input.Spans != len(ss) {
						b.Fatalf("analyzed %d spans, want %d", r.Input.Spans, len(ss))
					}
				}
				m.stop(b)
				m.report(b, len(ss))
			})
		}
	}
}
