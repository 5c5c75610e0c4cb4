package engine

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// TestInternerDerivedMatchesInference checks the cached origin and target (alone, and read
// together by originAndTarget) against originOf and targetOf, uncached, for URLs that share a
// cache key with an earlier one but differ in what the key leaves out (path, query, fragment,
// case, userinfo) and for shapes that are not cached. A cache keyed too coarsely would hand a
// later span an earlier span's answer.
func TestInternerDerivedMatchesInference(t *testing.T) {
	urls := []string{
		"http://api:8080/items/1?request_id=1",
		"http://api:8080/items/2?request_id=2",
		"http://api:8080/items/1?request_id=3#frag",
		"http://api:8080",
		"http://api:8080?q=1",
		"http://api:8080#f",
		"HTTP://API:8080/Items/1",
		"https://api/items/1?x=1",
		"https://user:pw@api/items/1",
		"https://user@/items/1",
		"http:///items/1",
		"://api/items/1",
		"http://[::1]:9000/a?b",
		"http://[::1]/a?b",
		"/relative/path?q=1",
		"",
	}
	type extra struct{ name, host, port, legacyURL string }
	extras := []extra{{}, {name: "host only", host: "db", port: "5432"}, {name: "legacy url", host: "db", legacyURL: "http://legacy:81/x?y"}}
	in := newInterner()
	var l1 derivedL1
	for round := range 3 { // later rounds read what the first one cached; the last one through l1
		for _, method := range []string{"GET", "POST", ""} {
			for _, u := range urls {
				for _, e := range extras {
					s := &spans.Span{Kind: spans.KindClient}
					add := func(k, v string) {
						if v != "" {
							s.Attrs = append(s.Attrs, spans.StringAttr(k, v))
						}
					}
					add(spans.AttrHTTPMethod, method)
					add(spans.AttrURLFull, u)
					add(spans.AttrServerAddress, e.host)
					add(spans.AttrServerPort, e.port)
					add(spans.AttrLegacyHTTPURL, e.legacyURL)
					name := fmt.Sprintf("round %d %s %q %s", round, method, u, e.name)
					k := knownOf(s)
					var l *derivedL1
					if round == 2 {
						l = &l1
					}
					if got, want := in.origin(&k, l), originOf(s); got != want {
						t.Errorf("%s: origin %q, want %q", name, got, want)
					}
					if got, want := in.target(&k, l), targetOf(s); got != want {
						t.Errorf("%s: target %q, want %q", name, got, want)
					}
					o, tg, host := in.originAndTarget(&k, l)
					if o != originOf(s) || tg != targetOf(s) {
						t.Errorf("%s: originAndTarget %q, %q, want %q, %q", name, o, tg, originOf(s), targetOf(s))
					}
					if host != "" && host != analyzer.HostDependency(o) {
						t.Errorf("%s: originAndTarget's host %q, want %q", name, host, analyzer.HostDependency(o))
					}
				}
			}
		}
	}
}

// TestInternerBypassesKeysThatDoNotComeBack checks that targets whose keys never repeat (an id
// in every path) stop going through the shared cache - it stops growing - while every answer
// stays targetOf's, and that a bypassed kind is measured again and cached once its keys repeat.
func TestInternerBypassesKeysThatDoNotComeBack(t *testing.T) {
	in := newInterner()
	target := func(path string) {
		t.Helper()
		s := &spans.Span{Kind: spans.KindClient, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"),
			spans.StringAttr(spans.AttrURLFull, "http://api:8080"+path+"?q=1")}}
		k := knownOf(s)
		if got, want := in.target(&k, nil), targetOf(s); got != want {
			t.Fatalf("target of %s = %q, want %q", path, got, want)
		}
	}
	for i := range 3 * derivedWindow {
		target(fmt.Sprintf("/items/%d", i))
	}
	kind := derivedKind('t')
	if in.bypass[kind].Load() <= 0 {
		t.Fatalf("no bypass after %d unrepeated keys", 3*derivedWindow)
	}
	if n := len(in.derived); n > derivedWindow+1 {
		t.Errorf("the shared cache grew to %d entries for keys that never came back", n)
	}
	// Past the bypass, repeated keys are looked up (and found) again.
	for i := range derivedBypass + 2*derivedWindow {
		target(fmt.Sprintf("/route/%d", i%8))
	}
	if in.bypass[kind].Load() > 0 {
		t.Errorf("still bypassing after a window of repeated keys")
	}
	if _, ok := in.derived[derivedKey{what: 't', a: "/route/3", b: "GET"}]; !ok {
		t.Errorf("a repeated target is not in the shared cache")
	}
}

// TestInternerCachedAnswersAllocateNothing: an origin or target found in a cache is handed out
// without allocating. (A key taken by address for the derivation once made every lookup, hit or
// miss, allocate its 80 bytes: a quarter of a megabyte per second in a collector under load.)
func TestInternerCachedAnswersAllocateNothing(t *testing.T) {
	in := newInterner()
	s := &spans.Span{Kind: spans.KindClient, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"),
		spans.StringAttr(spans.AttrURLFull, "http://api:8080/items/7?q=1")}}
	k := knownOf(s)
	for _, l1 := range []*derivedL1{nil, new(derivedL1)} {
		in.origin(&k, l1) // made and cached
		in.target(&k, l1)
		if n := testing.AllocsPerRun(100, func() {
			in.origin(&k, l1)
			in.target(&k, l1)
		}); n != 0 {
			t.Errorf("cached origin and target (l1 %v): %v allocations, want 0", l1 != nil, n)
		}
	}
}

// TestCachedOriginsNameTheirCallsWithoutAllocating: a cached origin comes with the name its
// calls go by when nothing else names the callee (analyzer.HostDependency of it), so naming a
// trace's calls by their host costs no parse and no allocation per trace. (Found per trace, it
// was one allocation a trace: net/netip's error for a host that is a name, not an address.)
func TestCachedOriginsNameTheirCallsWithoutAllocating(t *testing.T) {
	for _, c := range []struct{ url, host, port, want string }{
		{url: "http://inventory.shop.svc.cluster.local:8080/items/1?q=1", want: "inventory.shop.svc.cluster.local"},
		{url: "http://localhost:8080/items/1", want: "localhost:8080"},
		{url: "http://127.0.0.1:51234/x", want: "127.0.0.1"},
		{url: "http://[::1]:8080/x", want: "[::1]:8080"},
		{host: "db.internal", port: "5432", want: "db.internal"},
		{host: "localhost", port: "5432", want: "localhost:5432"},
	} {
		s := &spans.Span{Kind: spans.KindClient, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET")}}
		if c.url != "" {
			s.Attrs = append(s.Attrs, spans.StringAttr(spans.AttrURLFull, c.url))
		} else {
			s.Attrs = append(s.Attrs, spans.StringAttr(spans.AttrServerAddress, c.host), spans.StringAttr(spans.AttrServerPort, c.port))
		}
		k := knownOf(s)
		in := newInterner()
		for _, l1 := range []*derivedL1{nil, new(derivedL1)} {
			name := func() string {
				var h hostNames // one trace's
				u := k.str(wkURLFull)
				o, host := in.originAt(&k, u, strings.Index(u, "://"), l1)
				return h.dependencyName("", "", o, host)
			}
			if got := name(); got != c.want {
				t.Errorf("%s%s: named %q, want %q", c.url, c.host, got, c.want)
			}
			if n := testing.AllocsPerRun(100, func() { name() }); n != 0 {
				t.Errorf("%s%s (l1 %v): naming a cached origin's call costs %v allocations, want 0", c.url, c.host, l1 != nil, n)
			}
		}
	}
}

// TestMadeTargetsCostNoAllocationEach: targets that no cache keeps (an id in every URL, the shared
// cache bypassed) are written into the scratch's chunks - far fewer allocations than one a call -
// and each stays what it was made as while thousands more are made after it. An analysis whose
// operations are held as values gets targets of their own instead, in no chunk, so that the
// operations named after them keep no chunk alive.
func TestMadeTargetsCostNoAllocationEach(t *testing.T) {
	const n = 4 * derivedWindow
	in := newInterner()
	var l1 derivedL1
	ks := make([]known, 2*n)
	for i := range ks {
		s := &spans.Span{Kind: spans.KindClient, Attrs: []spans.Attr{spans.StringAttr(spans.AttrHTTPMethod, "GET"),
			spans.StringAttr(spans.AttrURLFull, fmt.Sprintf("http://api:8080/items/%d?q=1", i))}}
		ks[i] = knownOf(s)
	}
	made := make([]string, n)
	for i := range n {
		made[i] = in.target(&ks[i], &l1)
	}
	if in.bypass[derivedKind('t')].Load() <= 0 {
		t.Fatalf("no bypass after %d unrepeated keys", n)
	}
	i := n
	if allocs := testing.AllocsPerRun(n/2-1, func() {
		in.target(&ks[i], &l1)
		i++
	}); allocs > 0.1 {
		t.Errorf("a target no cache keeps: %v allocations, want a chunk's for many", allocs)
	}
	for j, got := range made {
		if want := fmt.Sprintf("GET /items/%d", j); got != want {
			t.Fatalf("target %d made earlier reads %q now, want %q", j, got, want)
		}
	}

	l1.made.held = true
	chunk := uintptr(unsafe.Pointer(unsafe.SliceData(l1.made.buf)))
	for j := n / 2; j < n; j++ {
		got := in.target(&ks[j], &l1)
		if p := uintptr(unsafe.Pointer(unsafe.StringData(got))); p >= chunk && p < chunk+uintptr(cap(l1.made.buf)) {
			t.Fatalf("held: target %q was made in the scratch's chunk", got)
		}
		if want := fmt.Sprintf("GET /items/%d", j); got != want {
			t.Fatalf("held: target %q, want %q", got, want)
		}
	}
}

// TestSchemeEnd holds schemeEnd to strings.Index's answer: the origin and target of a call cut its
// URL there, so a URL it misread would name another dependency.
func TestSchemeEnd(t *testing.T) {
	for _, u := range []string{
		"", "http", "http:", "http:/", "http://", "http://a", "http://a:8080/x?y#z", "https://", "https://a/b",
		"https:/a", "http:/a://b", "httpx://a", "HTTP://a", "grpc://a:443", "http//a://b", "https//:a://b",
		"http:://a", "ws://a", "/just/a/path", "a://b://c",
	} {
		if got, want := schemeEnd(u), strings.Index(u, "://"); got != want {
			t.Errorf("schemeEnd(%q) = %d, want %d", u, got, want)
		}
	}
}
