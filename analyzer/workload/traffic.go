package workload

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"io"
	"strconv"
)

// RealisticTraffic writes OTLP/JSON lines as the OpenTelemetry Collector's file exporter records
// a shop's traffic: spans as the Go SDK, otelhttp, otelgrpc and the reference client write them
// (semconv HTTP and gRPC attributes, resources with the SDK's and Kubernetes' attributes), each
// line one SDK export of a pod (one resource, up to a few more than 512 spans, spans of many
// traces), so a trace's spans arrive in several lines as they do from a real collector. A span
// takes about 815 bytes.
//
// The traffic is a request every millisecond of recorded time, from 2026-01-15 10:00 UTC, through
// frontend -> checkout -> (cart over gRPC, inventory over HTTP, an external payment provider over
// HTTPS), 8-12 spans a trace, every trace id unique:
//   - 37 traces in 100 call the payment provider through the reference client (an INTERNAL
//     operation span and its attempt spans with resilience.* attributes); in 12 of them it
//     retries (2 or 3 attempts), in one of those it fails every attempt and the request fails;
//     the other 63 call it with plain otelhttp, once;
//   - 13 traces in 100 retry inventory after a 503, with plain otelhttp (2 or 3 attempts,
//     http.request.resend_count set).
//
// It writes the bytes itself rather than through pdata or the spans package, so generating costs
// a small fraction of what reading costs and runs beside a measured reader without starving it;
// its test holds the bytes to what pdata's JSON marshaler writes for the same traces. The output
// depends only on the number of spans asked for: there is no seed, and every run writes the same
// bytes.
type RealisticTraffic struct {
	w      *bufio.Writer
	t0     int64
	traces uint64
	pods   [nServices][podsPerService]genPod
	made   int64 // spans generated
	spans  int64 // spans written out
	bytes  int64
	err    error
}

const (
	svcFrontend = iota
	svcCheckout
	svcCart
	svcInventory
	nServices
)

const (
	scopeHTTP = iota
	scopeGRPC
	scopeReference
	nScopes
)

const (
	podsPerService = 3
	// exportBatch is the Go SDK's BatchSpanProcessor's default largest export.
	exportBatch = 512
	kindServer  = 2
	kindClient  = 3
	kindInner   = 1
	flagsLocal  = 257 // sampled; parent known to be local
	flagsRemote = 769 // sampled; parent remote (a SERVER span under a caller in another process)
)

var serviceNames = [nServices]string{"frontend", "checkout", "cart", "inventory"}
var serviceVersions = [nServices]string{"3.8.2", "2.14.1", "1.22.0", "4.1.7"}

var scopeHeads = [nScopes]string{
	`{"scope":{"name":"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp","version":"0.63.0"},"spans":[`,
	`{"scope":{"name":"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc","version":"0.63.0"},"spans":[`,
	`{"scope":{"name":"github.com/stormwatch/stormwatch/reference"},"spans":[`,
}

const lineTail = `],"schemaUrl":"https://opentelemetry.io/schemas/1.26.0"}]}` + "\n"

// genPod is one SDK's export buffer: its resource, rendered once, and the spans it holds per scope.
type genPod struct {
	head   []byte
	ip     string
	scopes [nScopes][]byte
	n      int
}

// NewRealisticTraffic starts the traffic at its first trace, written to w.
func NewRealisticTraffic(w io.Writer) *RealisticTraffic {
	g := &RealisticTraffic{w: bufio.NewWriterSize(w, 1<<20), t0: 1768471200_000_000_000} // 2026-01-15 10:00 UTC
	for s := range nServices {
		for p := range podsPerService {
			g.pods[s][p] = newPod(s, p)
		}
	}
	return g
}

func newPod(svc, p int) genPod {
	name := serviceNames[svc]
	h := mix(uint64(svc)<<8 | uint64(p))
	podName := name + "-" + strconv.FormatUint(h>>40, 36) + "-" + strconv.FormatUint(h&0xffffff, 36)
	var id [16]byte
	binary.BigEndian.PutUint64(id[:8], h)
	binary.BigEndian.PutUint64(id[8:], mix(h))
	uuid := hex.EncodeToString(id[:])
	uuid = uuid[:8] + "-" + uuid[8:12] + "-" + uuid[12:16] + "-" + uuid[16:20] + "-" + uuid[20:]
	node := "ip-10-42-" + strconv.Itoa(p+1) + "-" + strconv.Itoa(17+svc) + ".eu-west-1.compute.internal"
	b := []byte(`{"resourceSpans":[{"resource":{"attributes":[`)
	b = attrStr(b, "service.name", name)
	b = attrStr(b, "service.namespace", "shop")
	b = attrStr(b, "service.version", serviceVersions[svc])
	b = attrStr(b, "service.instance.id", uuid)
	b = attrStr(b, "deployment.environment.name", "production")
	b = attrStr(b, "telemetry.sdk.language", "go")
	b = attrStr(b, "telemetry.sdk.name", "opentelemetry")
	b = attrStr(b, "telemetry.sdk.version", "1.38.0")
	b = attrStr(b, "host.name", podName)
	b = attrStr(b, "k8s.namespace.name", "shop")
	b = attrStr(b, "k8s.deployment.name", name)
	b = attrStr(b, "k8s.pod.name", podName)
	b = attrStr(b, "k8s.node.name", node)
	b = endAttrs(b)
	b = append(b, `},"scopeSpans":[`...)
	return genPod{head: b, ip: "10.42." + strconv.Itoa(p+1) + "." + strconv.Itoa(10+svc*20+p)}
}

// WriteSpans generates whole traces until at least n spans have been generated since the start,
// then writes every pod's buffer out as a line, so that a trace's spans are all out when it
// returns; a later call goes on with the next trace. It returns the first error of w, after
// which it writes nothing more.
func (g *RealisticTraffic) WriteSpans(n int64) error {
	for g.made < n && g.err == nil {
		g.trace(g.traces)
		g.traces++
	}
	for s := range g.pods {
		for p := range g.pods[s] {
			g.flush(&g.pods[s][p])
		}
	}
	if g.err == nil {
		g.err = g.w.Flush()
	}
	return g.err
}

// Spans is the number of spans written out.
func (g *RealisticTraffic) Spans() int64 { return g.spans }

// Traces is the number of traces generated.
func (g *RealisticTraffic) Traces() uint64 { return g.traces }

// Bytes is the number of bytes written out.
func (g *RealisticTraffic) Bytes() int64 { return g.bytes }

func (g *RealisticTraffic) flush(p *genPod) {
	if p.n == 0 || g.err != nil {
		return
	}
	out := len(p.head) + len(lineTail)
	_, g.err = g.w.Write(p.head)
	first := true
	for s := range p.scopes {
		body := p.scopes[s]
		if len(body) == 0 {
			continue
		}
		if !first {
			g.w.WriteByte(',')
			out++
		}
		first = false
		g.w.WriteString(scopeHeads[s])
		g.w.Write(body[:len(body)-1]) // without the trailing comma
		g.w.WriteString("]}")
		out += len(scopeHeads[s]) + len(body) - 1 + 2
		p.scopes[s] = body[:0]
	}
	if _, err := g.w.WriteString(lineTail); err != nil && g.err == nil {
		g.err = err
	}
	g.bytes += int64(out)
	g.spans += int64(p.n)
	p.n = 0
}

// mix is splitmix64's finalizer: a bijection, so distinct inputs give distinct ids.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// genSpan is what a span's header and trailer need; attributes are appended between them.
type genSpan struct {
	trace      *[16]byte
	id, parent uint64
	flags      int
	name       string
	kind       int
	start, end int64 // microseconds after the trace's start
	err        bool
	link       uint64 // the previous attempt's span id, 0 for none
}

// genTrace is the trace being written: where its spans go and its times.
type genTrace struct {
	g   *RealisticTraffic
	id  [16]byte
	k   uint64
	at  int64
	pod [nServices]int
}

func (t *genTrace) spanID(i uint64) uint64 { return mix(t.k<<8 | i) }

// begin opens a span in its service's pod under scope and returns the buffer to append
// attributes to; end closes it.
func (t *genTrace) begin(svc, scope int, s *genSpan) []byte {
	b := t.g.pods[svc][t.pod[svc]].scopes[scope]
	b = append(b, `{"traceId":"`...)
	b = hex.AppendEncode(b, s.trace[:])
	b = append(b, `","spanId":"`...)
	b = appendID(b, s.id)
	if s.parent != 0 {
		b = append(b, `","parentSpanId":"`...)
		b = appendID(b, s.parent)
	}
	b = append(b, `","flags":`...)
	b = strconv.AppendInt(b, int64(s.flags), 10)
	b = append(b, `,"name":"`...)
	b = append(b, s.name...)
	b = append(b, `","kind":`...)
	b = strconv.AppendInt(b, int64(s.kind), 10)
	b = append(b, `,"startTimeUnixNano":"`...)
	b = strconv.AppendInt(b, t.at+s.start*1000, 10)
	b = append(b, `","endTimeUnixNano":"`...)
	b = strconv.AppendInt(b, t.at+s.end*1000, 10)
	return append(b, `","attributes":[`...)
}

func (t *genTrace) end(svc, scope int, s *genSpan, b []byte) {
	b = endAttrs(b)
	if s.link != 0 {
		b = append(b, `,"links":[{"traceId":"`...)
		b = hex.AppendEncode(b, s.trace[:])
		b = append(b, `","spanId":"`...)
		b = appendID(b, s.link)
		b = append(b, `","attributes":[{"key":"resilience.link","value":{"stringValue":"previous_attempt"}}],"flags":257}]`...)
	}
	if s.err {
		b = append(b, `,"status":{"code":2}},`...)
	} else {
		b = append(b, `,"status":{}},`...)
	}
	p := &t.g.pods[svc][t.pod[svc]]
	p.scopes[scope] = b
	p.n++
	t.g.made++
}

func appendID(b []byte, id uint64) []byte {
	var raw [8]byte
	binary.BigEndian.PutUint64(raw[:], id)
	return hex.AppendEncode(b, raw[:])
}

func attrStr(b []byte, k, v string) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, k...)
	b = append(b, `","value":{"stringValue":"`...)
	b = append(b, v...)
	return append(b, `"}},`...)
}

// attrStrOpen starts a string attribute whose value the caller appends, then closes with attrStrClose.
func attrStrOpen(b []byte, k string) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, k...)
	return append(b, `","value":{"stringValue":"`...)
}

func attrStrClose(b []byte) []byte { return append(b, `"}},`...) }

func attrInt(b []byte, k string, v int64) []byte {
	b = append(b, `{"key":"`...)
	b = append(b, k...)
	b = append(b, `","value":{"intValue":"`...)
	b = strconv.AppendInt(b, v, 10)
	return append(b, `"}},`...)
}

// endAttrs closes an attribute list whose every entry ends with a comma.
func endAttrs(b []byte) []byte {
	if b[len(b)-1] == ',' {
		b = b[:len(b)-1]
	}
	return append(b, ']')
}

const (
	browserUA   = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15"
	goUA        = "Go-http-client/1.1"
	checkoutDNS = "checkout.shop.svc.cluster.local"
	cartDNS     = "cart.shop.svc.cluster.local"
	invDNS      = "inventory.shop.svc.cluster.local"
	pspDNS      = "api.psp.example.com"
)

// trace writes trace k: its spans, in the order each SDK ends them (children first).
func (g *RealisticTraffic) trace(k uint64) {
	r := mix(k ^ 0x5157_7a7c_4a11_0001)
	t := genTrace{g: g, k: k, at: g.t0 + int64(k)*1_000_000}
	binary.BigEndian.PutUint64(t.id[:8], mix(k))
	binary.BigEndian.PutUint64(t.id[8:], mix(k^0xa5a5_a5a5_a5a5_a5a5))
	for s := range t.pod {
		t.pod[s] = int(r >> (8 * s) % podsPerService)
	}
	shape := r >> 32 % 100
	var cart [12]byte
	hex.Encode(cart[:], t.id[10:16])
	cartID := "c" + string(cart[:11])
	item := strconv.AppendUint(nil, 100_000+r>>40%900_000, 10)

	// Ids in the order spans start.
	const (
		idRoot = iota + 1
		idFrontClient
		idCheckout
		idCartClient
		idCartServer
		idPayOp
		idNext // attempts from here
	)
	var b []byte
	now := int64(800)
	// checkout -> cart over gRPC.
	dCart := 1500 + int64(r>>16%4000)
	cc := genSpan{trace: &t.id, id: t.spanID(idCartClient), parent: t.spanID(idCheckout), flags: flagsLocal,
		name: "cart.v1.CartService/GetCart", kind: kindClient, start: now, end: now + dCart}
	cs := genSpan{trace: &t.id, id: t.spanID(idCartServer), parent: cc.id, flags: flagsRemote,
		name: cc.name, kind: kindServer, start: now + 150, end: now + dCart - 150}
	b = t.begin(svcCart, scopeGRPC, &cs)
	b = attrStr(b, "rpc.system", "grpc")
	b = attrStr(b, "rpc.service", "cart.v1.CartService")
	b = attrStr(b, "rpc.method", "GetCart")
	b = attrStr(b, "network.peer.address", g.pods[svcCheckout][t.pod[svcCheckout]].ip)
	b = attrInt(b, "rpc.grpc.status_code", 0)
	t.end(svcCart, scopeGRPC, &cs, b)
	b = t.begin(svcCheckout, scopeGRPC, &cc)
	b = attrStr(b, "rpc.system", "grpc")
	b = attrStr(b, "rpc.service", "cart.v1.CartService")
	b = attrStr(b, "rpc.method", "GetCart")
	b = attrStr(b, "server.address", cartDNS)
	b = attrInt(b, "server.port", 9090)
	b = attrInt(b, "rpc.grpc.status_code", 0)
	t.end(svcCheckout, scopeGRPC, &cc, b)
	now += dCart + 200

	// checkout -> inventory over HTTP, retried after a 503 in one trace in eight.
	next := uint64(idNext)
	invAttempts := 1
	switch {
	case shape >= 95:
		invAttempts = 3
	case shape >= 87:
		invAttempts = 2
	}
	dInv := 4000 + int64(r>>28%8000)
	for a := 1; a <= invAttempts; a++ {
		failed := a < invAttempts
		d := dInv
		status := int64(200)
		if failed {
			d, status = dInv/4, 503
		}
		c := genSpan{trace: &t.id, id: t.spanID(next), parent: t.spanID(idCheckout), flags: flagsLocal,
			name: "GET", kind: kindClient, start: now, end: now + d, err: failed}
		s := genSpan{trace: &t.id, id: t.spanID(next + 1), parent: c.id, flags: flagsRemote,
			name: "GET /api/v1/inventory/items/{id}", kind: kindServer, start: now + 300, end: now + d - 300, err: failed}
		next += 2
		b = t.begin(svcInventory, scopeHTTP, &s)
		b = meshServerAttrs(b, "/api/v1/inventory/items/", item, invDNS, g.pods[svcCheckout][t.pod[svcCheckout]].ip,
			"/api/v1/inventory/items/{id}", status, failed, "503")
		t.end(svcInventory, scopeHTTP, &s, b)
		b = t.begin(svcCheckout, scopeHTTP, &c)
		b = attrStr(b, "http.request.method", "GET")
		b = attrStrOpen(b, "url.full")
		b = append(b, "http://"+invDNS+":8080/api/v1/inventory/items/"...)
		b = append(b, item...)
		b = attrStrClose(append(b, "?fields=price,stock,warehouse&warehouse=eu-west-1"...))
		b = attrStr(b, "server.address", invDNS)
		b = attrInt(b, "server.port", 8080)
		if a > 1 {
			b = attrInt(b, "http.request.resend_count", int64(a-1))
		}
		b = attrInt(b, "http.response.status_code", status)
		if failed {
			b = attrStr(b, "error.type", "503")
		}
		t.end(svcCheckout, scopeHTTP, &c, b)
		now += d + 100
		if failed {
			now += 20_000 * int64(a) // the application's backoff
		}
	}

	// checkout -> the payment provider: the reference client in 37 traces in 100, which retries in
	// 12 of them, plain otelhttp in the rest.
	dPay := 15_000 + int64(r>>36%30_000)
	payStatus := int64(200)
	pay := func(b []byte) []byte {
		b = attrStrOpen(b, "url.full")
		b = append(b, "https://"+pspDNS+"/v2/payment_intents/pi_"...)
		b = append(b, cart[:]...)
		return attrStrClose(append(b, "/confirm?expand=latest_charge"...))
	}
	if shape < 50 || shape >= 87 {
		c := genSpan{trace: &t.id, id: t.spanID(next), parent: t.spanID(idCheckout), flags: flagsLocal,
			name: "POST", kind: kindClient, start: now, end: now + dPay}
		b = t.begin(svcCheckout, scopeHTTP, &c)
		b = attrStr(b, "http.request.method", "POST")
		b = pay(b)
		b = attrStr(b, "server.address", pspDNS)
		b = attrInt(b, "server.port", 443)
		b = attrInt(b, "http.response.status_code", 200)
		t.end(svcCheckout, scopeHTTP, &c, b)
		now += dPay + 100
	} else {
		attempts, allFail := 1, false
		switch {
		case shape == 86:
			attempts, allFail = 3, true
		case shape >= 83:
			attempts = 3
		case shape >= 75:
			attempts = 2
		}
		var raw [16]byte
		var opID [32]byte
		var key [16]byte
		binary.BigEndian.PutUint64(raw[:8], mix(r))
		binary.BigEndian.PutUint64(raw[8:], mix(r^1))
		hex.Encode(opID[:], raw[:])
		binary.BigEndian.PutUint64(raw[:8], mix(r^2))
		hex.Encode(key[:], raw[:8])
		opStart := now
		deadline := t.at + (opStart+2_000_000)*1000
		op := genSpan{trace: &t.id, id: t.spanID(idPayOp), parent: t.spanID(idCheckout), flags: flagsLocal,
			name: "HTTP POST", kind: kindInner, start: opStart}
		now += 80
		prev := uint64(0)
		for a := 1; a <= attempts; a++ {
			failed := a < attempts || allFail
			d, status, backoff := dPay, int64(200), int64(0)
			if failed {
				d, status = dPay/5, 503
			}
			if a > 1 {
				backoff = 25 << (a - 2)
			}
			c := genSpan{trace: &t.id, id: t.spanID(next), parent: op.id, flags: flagsLocal,
				name: "POST", kind: kindClient, start: now, end: now + d, err: failed, link: prev}
			next++
			b = t.begin(svcCheckout, scopeReference, &c)
			b = attrStr(b, "http.request.method", "POST")
			b = attrStr(b, "server.address", pspDNS)
			b = attrInt(b, "server.port", 443)
			b = pay(b)
			b = attrStrOpen(b, "resilience.operation.id")
			b = attrStrClose(append(b, opID[:]...))
			b = attrInt(b, "resilience.attempt", int64(a))
			if a == 1 {
				b = attrStr(b, "resilience.attempt.kind", "initial")
			} else {
				b = attrStr(b, "resilience.attempt.kind", "retry")
			}
			b = attrInt(b, "resilience.deadline.remaining_ms", 2000-(now-opStart)/1000)
			b = attrInt(b, "resilience.fanout.width", 1)
			if a > 1 {
				b = attrInt(b, "http.request.resend_count", int64(a-1))
				b = attrInt(b, "resilience.backoff_ms", backoff)
			}
			b = attrStrOpen(b, "resilience.idempotency_key")
			b = attrStrClose(append(append(b, "sha256:"...), key[:]...))
			b = attrInt(b, "http.response.status_code", status)
			switch {
			case !failed:
				b = attrStr(b, "resilience.outcome", "ok")
				b = attrStr(b, "resilience.decision", "return")
			case a < attempts:
				b = attrStr(b, "resilience.outcome", "retryable")
				b = attrStr(b, "resilience.decision", "retry")
			default:
				b = attrStr(b, "resilience.outcome", "retryable")
				b = attrStr(b, "resilience.decision", "stop")
			}
			if failed {
				b = attrStr(b, "error.type", "503")
			}
			t.end(svcCheckout, scopeReference, &c, b)
			prev = c.id
			now += d
			if a < attempts {
				now += (25 << (a - 1)) * 1000 // the next attempt's backoff
			}
		}
		now += 30
		op.end = now
		op.err = allFail
		b = t.begin(svcCheckout, scopeReference, &op)
		b = attrStrOpen(b, "resilience.operation.id")
		b = attrStrClose(append(b, opID[:]...))
		b = attrStr(b, "resilience.operation.name", "HTTP POST")
		b = attrStr(b, "resilience.owner", "checkout")
		b = attrInt(b, "resilience.deadline", deadline)
		b = attrStr(b, "http.request.method", "POST")
		b = attrStr(b, "server.address", pspDNS)
		b = attrInt(b, "server.port", 443)
		b = attrStrOpen(b, "resilience.idempotency_key")
		b = attrStrClose(append(append(b, "sha256:"...), key[:]...))
		if allFail {
			b = attrStr(b, "resilience.stop_reason", "max_attempts")
			b = attrStr(b, "resilience.terminal", "fail-fast")
			b = attrInt(b, "http.response.status_code", 503)
			payStatus = 502
		} else {
			b = attrStr(b, "resilience.stop_reason", "succeeded")
			b = attrStr(b, "resilience.terminal", "complete")
			b = attrInt(b, "http.response.status_code", 200)
		}
		t.end(svcCheckout, scopeReference, &op, b)
		now += 100
	}

	// checkout's SERVER span, then frontend's call to it and the root.
	failed := payStatus != 200
	chk := genSpan{trace: &t.id, id: t.spanID(idCheckout), parent: t.spanID(idFrontClient), flags: flagsRemote,
		name: "GET /api/v1/checkout/{cartId}", kind: kindServer, start: 500, end: now + 200, err: failed}
	b = t.begin(svcCheckout, scopeHTTP, &chk)
	b = meshServerAttrs(b, "/api/v1/checkout/", cartID, checkoutDNS, g.pods[svcFrontend][t.pod[svcFrontend]].ip,
		"/api/v1/checkout/{cartId}", payStatus, failed, "502")
	t.end(svcCheckout, scopeHTTP, &chk, b)

	fc := genSpan{trace: &t.id, id: t.spanID(idFrontClient), parent: t.spanID(idRoot), flags: flagsLocal,
		name: "GET", kind: kindClient, start: 250, end: now + 400, err: failed}
	b = t.begin(svcFrontend, scopeHTTP, &fc)
	b = attrStr(b, "http.request.method", "GET")
	b = attrStrOpen(b, "url.full")
	b = append(b, "http://"+checkoutDNS+":8080/api/v1/checkout/"...)
	b = attrStrClose(append(append(b, cartID...), "?currency=EUR&include=items,totals"...))
	b = attrStr(b, "server.address", checkoutDNS)
	b = attrInt(b, "server.port", 8080)
	b = attrInt(b, "http.response.status_code", payStatus)
	if failed {
		b = attrStr(b, "error.type", "502")
	}
	t.end(svcFrontend, scopeHTTP, &fc, b)

	root := genSpan{trace: &t.id, id: t.spanID(idRoot), flags: flagsLocal,
		name: "GET /checkout/{cartId}", kind: kindServer, start: 0, end: now + 900, err: failed}
	b = t.begin(svcFrontend, scopeHTTP, &root)
	b = attrStr(b, "http.request.method", "GET")
	b = attrStr(b, "url.scheme", "https")
	b = attrStrOpen(b, "url.path")
	b = attrStrClose(append(append(b, "/checkout/"...), cartID...))
	b = attrStr(b, "url.query", "step=review&lang=en-GB")
	b = attrStr(b, "server.address", "shop.example.com")
	b = attrInt(b, "server.port", 443)
	b = attrStr(b, "client.address", "203.0.113."+strconv.Itoa(int(r>>44%250)+1))
	b = attrStr(b, "network.peer.address", "10.42.0."+strconv.Itoa(int(r>>52%8)+2))
	b = attrStr(b, "user_agent.original", browserUA)
	b = attrStr(b, "network.protocol.version", "1.1")
	b = attrStr(b, "http.route", "/checkout/{cartId}")
	b = attrInt(b, "http.response.status_code", payStatus)
	if failed {
		b = attrStr(b, "error.type", "502")
	}
	t.end(svcFrontend, scopeHTTP, &root, b)

	for s := range t.pod {
		if p := &g.pods[s][t.pod[s]]; p.n >= exportBatch {
			g.flush(p)
		}
	}
}

// meshServerAttrs appends the attributes of an HTTP SERVER span of a service inside the cluster,
// called by another Go service: GET pathPrefix+id on host:8080 from peerIP, answered with status
// (and errType when it failed).
func meshServerAttrs[ID ~string | ~[]byte](b []byte, pathPrefix string, id ID, host, peerIP, route string, status int64, failed bool, errType string) []byte {
	b = attrStr(b, "http.request.method", "GET")
	b = attrStrOpen(b, "url.path")
	b = attrStrClose(append(append(b, pathPrefix...), id...))
	b = attrStr(b, "server.address", host)
	b = attrInt(b, "server.port", 8080)
	b = attrStr(b, "network.peer.address", peerIP)
	b = attrStr(b, "user_agent.original", goUA)
	b = attrStr(b, "network.protocol.version", "1.1")
	b = attrStr(b, "http.route", route)
	b = attrInt(b, "http.response.status_code", status)
	if failed {
		b = attrStr(b, "error.type", errType)
	}
	return b
}
