package engine

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// callInfo is what inference needs of one CLIENT span, computed once.
type callInfo struct {
	idx     int32
	op      int32  // index of its operation in the trace's ops; -1 until grouped
	origin  string // scheme://host:port
	service string // the callee's service.name, when a SERVER child (or another call to origin) says
	// dep names the dependency (see dependencyName): the key of the accounting, the operation's
	// Dependency. Until the trace's calls are all read, the span's rpc.service.
	dep     string
	target  string // method and path, or the RPC method: what was asked
	outcome string
	status  string
	// Reference-client and protocol hints; -1 when absent.
	attempt  int64
	resend   int64
	backoff  int64 // resilience.backoff_ms
	deadline int64 // resilience.deadline
	kind     string
	opID     string
	// answer is the earliest the caller can have had its answer: the start plus the callee's
	// SERVER time where the callee is traced, the span's end otherwise. A client span may end only
	// when the body is closed, long after the answer: where the next attempt starts before this
	// call's end, overlap and pause are judged from the answer instead.
	answer int64
	// servers counts the callee's SERVER spans right under this call; more than one means the
	// request was sent again below the instrumentation (see untracedHop).
	servers int32
	// below: the physical calls of this call are counted from the callee's SERVER spans under it
	// (an untraced hop), not from the call itself.
	below bool
	// giveUp is when the caller stopped waiting for the answer, on its clock; 0 when it waited
	// (see giveUpAt).
	giveUp int64
}

// overlapTolerance is how far a call may start before the previous one's answer and still be
// read as sequential: SDKs that stamp whole milliseconds (Node's) make back-to-back attempts
// overlap by up to a millisecond.
const overlapTolerance = int64(1e6)

var grpcCodes = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// classify finds a CLIENT span's outcome class and status text.
func classify(k *known) (outcome, status string) {
	s := k.s
	explicit := k.str(wkOutcome)
	a, ok := k.attr(wkHTTPStatus)
	if !ok {
		a, ok = k.attr(wkLegacyHTTPStatusCode)
	}
	if ok {
		status = noAnswer(statusText(a))
	}
	if status != "" {
		code, _ := a.AsInt()
		switch {
		case code >= 200 && code < 400:
			outcome = analyzer.OutcomeOK
		case code == 408 || code == 425 || code == 429 || code >= 500:
			outcome = analyzer.OutcomeRetryable
		default:
			outcome = analyzer.OutcomePermanent
		}
	} else if g := grpcStatus(k); g != "" {
		status = g
		switch g {
		case "OK":
			outcome = analyzer.OutcomeOK
		case "UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED":
			outcome = analyzer.OutcomeRetryable
		case "DEADLINE_EXCEEDED":
			outcome = analyzer.OutcomeTimeout
		case "CANCELLED":
			outcome = analyzer.OutcomeCancelled
		default:
			outcome = analyzer.OutcomePermanent
		}
	} else if s.Status == spans.StatusError || k.str(wkErrorType) != "" || k.errorTag() {
		outcome = errorClass(k)
	} else {
		outcome = analyzer.OutcomeOK
	}
	if f := k.proxyOutcome(status); f != "" {
		outcome = f
	}
	if explicit != "" {
		outcome = explicit
	}
	return outcome, status
}

// grpcStatus reads either spelling of the gRPC status: the current string attribute or the older
// integer one.
func grpcStatus(k *known) string {
	a, ok := k.attr(wkRPCStatus)
	if !ok {
		a, ok = k.attr(wkRPCGRPCStatus)
	}
	if !ok {
		a, ok = k.attr(wkEnvoyGRPCStatus)
	}
	if !ok {
		return ""
	}
	// A name ("UNAVAILABLE") is the common case: no number parsing (and its error) for it.
	if a.Type == spans.ValueString && (a.Str == "" || a.Str[0] < '0' || a.Str[0] > '9') {
		if isUpper(a.Str) {
			return a.Str
		}
		return strings.ToUpper(a.Str)
	}
	if n, isNum := a.AsInt(); isNum && n >= 0 && int(n) < len(grpcCodes) {
		return grpcCodes[n]
	}
	return strings.ToUpper(a.AsString())
}

func isUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'a' <= s[i] && s[i] <= 'z' {
			return false
		}
	}
	return true
}

// statusTexts are the HTTP statuses as text, made once: every call has one.
var statusTexts = func() []string {
	t := make([]string, 600)
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func statusText(a spans.Attr) string {
	if n, ok := a.AsInt(); ok && n >= 0 && n < int64(len(statusTexts)) {
		return statusTexts[n]
	}
	return a.AsString()
}

// errorClass reads a failed call with no status code: a timeout, a cancellation, a breaker's
// refusal, or (anything else) a connect-level error that is worth retrying.
func errorClass(k *known) string {
	s := k.s
	text := strings.ToLower(k.str(wkErrorType) + " " + s.StatusMessage + " " + k.str(wkExceptionType) + " " + k.str(wkExceptionMessage))
	for i := range s.Events {
		for _, a := range s.Events[i].Attrs {
			if a.Key == "exception.message" || a.Key == "exception.type" {
				text += " " + strings.ToLower(a.AsString())
			}
		}
	}
	switch {
	case strings.Contains(text, "deadline") || strings.Contains(text, "timeout") || strings.Contains(text, "timed out"):
		return analyzer.OutcomeTimeout
	case strings.Contains(text, "cancel"):
		return analyzer.OutcomeCancelled
	case strings.Contains(text, "circuit") || strings.Contains(text, "breaker") || strings.Contains(text, "budget"):
		return analyzer.OutcomeRefused
	}
	return analyzer.OutcomeRetryable
}

// StatusText is the outcome key used in DependencyStats.Outcomes: the status when there is one,
// otherwise the class ("timeout", "connect error", ...).
func statusKey(outcome, status string) string {
	if status != "" {
		return status
	}
	if outcome == analyzer.OutcomeRetryable {
		return "connect error"
	}
	return outcome
}

// originOf finds scheme://host:port of a CLIENT span.
func originOf(s *spans.Span) string {
	k := knownOf(s)
	return k.origin()
}

// origin is originOf of the indexed span.
func (k *known) origin() string {
	if u := k.str(wkURLFull); u != "" {
		if o := originOfURL(u); o != "" {
			return o
		}
	}
	if u := k.str(wkLegacyHTTPURL); u != "" {
		if o := originOfURL(u); o != "" {
			return o
		}
	}
	isRPC := k.str(wkRPCSystem) != "" || k.str(wkRPCMethod) != ""
	scheme := k.str(wkURLScheme)
	if scheme == "" {
		scheme = "http"
		if isRPC {
			scheme = "grpc"
		}
	}
	host, port := k.str(wkServerAddress), k.str(wkServerPort)
	if host == "" {
		host, port = k.str(wkLegacyNetPeerName), k.str(wkLegacyNetPeerPort)
	}
	if host == "" {
		host, port = k.str(wkNetworkPeerAddress), k.str(wkNetworkPeerPort)
	}
	if host != "" {
		if port == "" {
			port = defaultPort(scheme)
		}
		return scheme + "://" + joinHostPort(host, port)
	}
	if svc := k.str(wkRPCService); svc != "" {
		return "grpc://" + svc
	}
	return ""
}

func joinHostPort(host, port string) string {
	if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

func defaultPort(scheme string) string {
	switch scheme {
	case "https", "grpcs":
		return "443"
	case "grpc":
		return "443"
	}
	return "80"
}

// originOfURL cuts scheme://host:port out of an absolute URL without allocating a url.URL.
func originOfURL(u string) string {
	i := strings.Index(u, "://")
	if i <= 0 {
		return ""
	}
	scheme := strings.ToLower(u[:i])
	rest := u[i+3:]
	if j := indexEndOfAuthority(rest); j >= 0 {
		rest = rest[:j]
	}
	if j := strings.LastIndexByte(rest, '@'); j >= 0 {
		rest = rest[j+1:]
	}
	if rest == "" {
		return ""
	}
	hasPort := false
	if strings.HasPrefix(rest, "[") {
		hasPort = strings.Contains(rest, "]:")
	} else {
		hasPort = strings.IndexByte(rest, ':') >= 0
	}
	if !hasPort {
		rest += ":" + defaultPort(scheme)
	}
	return scheme + "://" + strings.ToLower(rest)
}

// pathOfURL is the path of an absolute URL without query or fragment.
func pathOfURL(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		j := strings.IndexByte(u, '/')
		if j < 0 {
			return "/"
		}
		u = u[j:]
	}
	if j := indexEndOfPath(u); j >= 0 {
		u = u[:j]
	}
	return u
}

// targetOf is what a call asked for, independent of which replica it went to: method and path for
// HTTP, the full method for RPC. Span names are not used: they differ by language and protocol.
func targetOf(s *spans.Span) string {
	k := knownOf(s)
	return k.target()
}

// target is targetOf of the indexed span.
func (k *known) target() string {
	if m := k.str(wkRPCMethod); m != "" {
		if svc := k.str(wkRPCService); svc != "" && !strings.Contains(m, "/") {
			return svc + "/" + m
		}
		return m
	}
	method := k.str(wkHTTPMethod)
	if method == "" {
		method = k.str(wkLegacyHTTPMethod)
	}
	path := ""
	if u := k.str(wkURLFull); u != "" {
		path = pathOfURL(u)
	} else if p := k.str(wkURLPath); p != "" {
		path = p
	} else if u := k.str(wkLegacyHTTPURL); u != "" {
		path = pathOfURL(u)
	} else if u := k.str(wkLegacyHTTPTarget); u != "" {
		path = pathOfURL(u)
	} else if r := k.str(wkHTTPRoute); r != "" {
		path = r
	}
	if method == "" && path == "" {
		return ""
	}
	return strings.TrimSpace(method + " " + path)
}

func intAttr(s *spans.Span, key string) int64 {
	if n, ok := s.Int(key); ok {
		return n
	}
	return -1
}

// opBufs hold one trace's operations as inference makes them. Operations, their attempts and the
// attempts' calls and origins are carved out of one buffer each, sized for the trace's CLIENT
// spans (none of them can outnumber the calls): a few allocations per trace (one for most, see
// make) instead of several per operation and per caller. Each carved slice is capped when
// complete, so nothing appended later can spill into a neighbour.
type opBufs struct {
	slab    []analyzer.Operation
	att     []analyzer.Attempt
	calls   []spans.SpanID
	origins []string
	// hexIDs is every call's span id in hex, 16 digits each by call index, made when the first
	// operation needs one for its id: one string for the trace instead of one per operation.
	hexIDs string
}

// make sizes the buffers for n calls and returns the operations' list, empty with room for n.
// A trace with up to 8 calls (most traces) gets all its buffers in one allocation of exactly its
// size, where separate buffers would be five; a larger one gets one per buffer.
func (b *opBufs) make(n int, spare *opsSpare) []*analyzer.Operation {
	if ops, ok := spare.take(b, n); ok {
		return ops
	}
	switch n {
	case 1:
		k := new(struct {
			o [1]*analyzer.Operation
			s [1]analyzer.Operation
			a [1]analyzer.Attempt
			c [1]spans.SpanID
			r [1]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 2:
		k := new(struct {
			o [2]*analyzer.Operation
			s [2]analyzer.Operation
			a [2]analyzer.Attempt
			c [2]spans.SpanID
			r [2]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 3:
		k := new(struct {
			o [3]*analyzer.Operation
			s [3]analyzer.Operation
			a [3]analyzer.Attempt
			c [3]spans.SpanID
			r [3]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 4:
		k := new(struct {
			o [4]*analyzer.Operation
			s [4]analyzer.Operation
			a [4]analyzer.Attempt
			c [4]spans.SpanID
			r [4]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 5:
		k := new(struct {
			o [5]*analyzer.Operation
			s [5]analyzer.Operation
			a [5]analyzer.Attempt
			c [5]spans.SpanID
			r [5]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 6:
		k := new(struct {
			o [6]*analyzer.Operation
			s [6]analyzer.Operation
			a [6]analyzer.Attempt
			c [6]spans.SpanID
			r [6]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 7:
		k := new(struct {
			o [7]*analyzer.Operation
			s [7]analyzer.Operation
			a [7]analyzer.Attempt
			c [7]spans.SpanID
			r [7]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	case 8:
		k := new(struct {
			o [8]*analyzer.Operation
			s [8]analyzer.Operation
			a [8]analyzer.Attempt
			c [8]spans.SpanID
			r [8]string
		})
		return b.carve(k.o[:], k.s[:], k.a[:], k.c[:], k.r[:])
	}
	return b.carve(make([]*analyzer.Operation, n), make([]analyzer.Operation, n), make([]analyzer.Attempt, n), make([]spans.SpanID, n), make([]string, n))
}

// compact moves the operations into a slab of their own size when the one sized for the trace's
// calls is mostly empty, and returns their list anew. Retries make several calls per operation
// (the amplification fixtures' operations fill a third of it), and operations held as values
// (Config.holdsOperationsPacked false) are held as long as the trace: the empty part was memory
// held and scanned by the garbage collector on every cycle. Operations point to their parent, so those pointers are moved along; nothing else
// points to an operation yet (calls and spans name theirs by index).
func (b *opBufs) compact(ops []*analyzer.Operation) []*analyzer.Operation {
	slab := b.slab
	if cap(slab) <= 8 || 4*len(slab) > 3*cap(slab) || len(ops) != len(slab) {
		// Small traces' buffers are one allocation with the rest; a slab grown past its first
		// (refused operations beyond the calls, not reached in practice) is left as it is.
		return ops
	}
	size := unsafe.Sizeof(analyzer.Operation{})
	base := uintptr(unsafe.Pointer(unsafe.SliceData(slab)))
	index := func(op *analyzer.Operation) int {
		off := uintptr(unsafe.Pointer(op)) - base
		if op == nil || off >= uintptr(len(slab))*size {
			return -1
		}
		return int(off / size)
	}
	for _, op := range ops {
		if index(op) < 0 || op.Parent != nil && index(op.Parent) < 0 {
			return ops
		}
	}
	fresh := make([]analyzer.Operation, len(slab))
	copy(fresh, slab)
	for i := range fresh {
		if p := fresh[i].Parent; p != nil {
			fresh[i].Parent = &fresh[index(p)]
		}
	}
	out := make([]*analyzer.Operation, len(ops))
	for k, op := range ops {
		out[k] = &fresh[index(op)]
	}
	b.slab = fresh
	return out
}

// opsSpare holds the arrays of operations that went on packed (see hold), or whose trace was
// evicted (its result dropped once published), for the next trace of the same scratch: such
// operations are garbage once analyzed, and making them anew for every trace was the analysis's
// largest allocation. make takes them when they are large enough (the result then owns them: one
// that holds its operations as values keeps them); give puts them back once nothing points to
// them (see Engine.run). They are cleared there, and only as far as they were used:
// newOperation fills an operation in place and relies on its zero fields.
type opsSpare struct {
	ops     []*analyzer.Operation
	slab    []analyzer.Operation
	att     []analyzer.Attempt
	calls   []spans.SpanID
	origins []string
}

// take carves b from the spare arrays when each has room for n calls, and empties the spare.
func (sp *opsSpare) take(b *opBufs, n int) ([]*analyzer.Operation, bool) {
	if cap(sp.ops) < n || cap(sp.slab) < n || cap(sp.att) < n || cap(sp.calls) < n || cap(sp.origins) < n {
		return nil, false
	}
	ops := b.carve(sp.ops[:n], sp.slab[:n], sp.att[:n], sp.calls[:n], sp.origins[:n])
	*sp = opsSpare{}
	return ops, true
}

// give keeps the arrays of b and ops (the list make returned, as inference left it) as the
// spare, cleared. The caller guarantees nothing points into them any more. Arrays beyond
// maxScratch elements are not kept.
func (sp *opsSpare) give(b *opBufs, ops []*analyzer.Operation) {
	if cap(b.slab) == 0 || cap(b.slab) > maxScratch || cap(ops) > maxScratch {
		return // nothing made, or too large to keep
	}
	clear(ops)
	clear(b.slab)
	clear(b.att)
	clear(b.origins)
	*sp = opsSpare{ops: ops[:0], slab: b.slab[:0], att: b.att[:0], calls: b.calls[:0], origins: b.origins[:0]}
	*b = opBufs{}
}

// carve makes the buffers empty slices of the given arrays, and returns the operations' list.
func (b *opBufs) carve(ops []*analyzer.Operation, slab []analyzer.Operation, att []analyzer.Attempt, calls []spans.SpanID, origins []string) []*analyzer.Operation {
	*b = opBufs{slab: slab[:0], att: att[:0], calls: calls[:0], origins: origins[:0]}
	return ops[:0]
}

// inferOperations groups the CLIENT spans of t into logical operations and links each operation
// to the one it runs inside. It runs in one pre-order pass over the tree, so parents' operations
// exist before their children's; grouping under one caller sorts the caller's calls once, so ten
// thousand siblings cost n log n, not n squared.
func (t *trace) inferOperations(seed maphash.Seed, skew int64, in *interner, sc *scratch) []*analyzer.Operation {
	n := len(t.Spans)
	// The index's Call and Enclosing were carved by buildTrace. Every span's attributes are indexed
	// once.
	kn := slices.Grow(sc.known[:0], n)[:n]
	sc.known = kn
	nClient := 0
	var carried uint64
	for i := range t.Spans {
		t.Index().Call[i] = -1
		t.Index().Enclosing[i] = -1
		s := &t.Spans[i]
		kn[i].read(s, sc.carry)
		carried |= kn[i].carried()
		if s.Kind == spans.KindClient {
			nClient++
		} else if t.attemptParent(i, &kn[i]) >= 0 {
			// An attempt span under a CLIENT span is a call too (grpcattempts.go): marked for
			// the loop below.
			nClient++
			t.Index().Call[i] = attemptMark
		}
	}
	t.Index().Carried, t.Index().CarriedKeys = carried, sc.carry.indexed()
	t.indexWide(sc)
	// The calls are read only while the trace is analyzed (see analyzeTrace): scratch.
	t.calls = slices.Grow(sc.calls[:0], nClient)
	sc.opCalls, sc.opStart = sc.opCalls[:0], sc.opStart[:0]
	// origin -> service, for calls whose callee span is missing.
	originService := &sc.originService
	for i := range t.Spans {
		s := &t.Spans[i]
		attemptOf := int32(-1)
		if s.Kind != spans.KindClient {
			if t.Index().Call[i] != attemptMark {
				continue
			}
			attemptOf = t.Index().Parent[i]
		}
		k := &kn[i]
		c := callInfo{
			idx:      int32(i),
			op:       -1,
			origin:   in.origin(k, &sc.derived),
			target:   in.target(k, &sc.derived),
			attempt:  k.intOr(wkAttempt),
			resend:   k.intOr(wkHTTPResendCount),
			backoff:  k.intOr(wkBackoff),
			deadline: k.intOr(wkDeadline),
			kind:     k.str(wkAttemptKind),
			opID:     k.str(wkOpID),
			dep:      k.str(wkRPCService),
		}
		if c.resend < 0 {
			c.resend = k.intOr(wkGRPCPreviousAttempts)
		}
		if c.resend < 0 {
			c.resend = k.intOr(wkGRPCAttemptPrevious) // gRPC's own per-attempt spans
		}
		if c.resend < 0 {
			c.resend = k.retryCount() // a proxy's per-try span
		}
		c.outcome, c.status = classify(k)
		c.answer = t.End(i)
		var srvStart, srvEnd int64
		srvFirst := int32(-1)
		for _, ch := range t.Children(i) {
			cs := &t.Spans[ch]
			if cs.Kind != spans.KindServer || sc.wide.nested[ch] {
				continue
			}
			if c.service == "" {
				c.service = cs.Service()
			}
			if c.servers == 0 || cs.StartUnixNano < srvStart {
				srvStart, srvFirst = cs.StartUnixNano, ch
			}
			srvEnd = max(srvEnd, t.End(int(ch)))
			c.servers++
		}
		if c.servers > 0 {
			// The callee's time, aligned to start when the call did: its clock may be skewed,
			// its duration is not.
			c.answer = min(c.answer, s.StartUnixNano+max(0, srvEnd-srvStart))
		} else {
			c.service = k.calleeName() // the proxy's or the tracer's own word for the callee
		}
		c.giveUp = t.giveUpAt(int32(i), srvFirst, k, srvStart, srvEnd, c.outcome, c.status, skew, kn)
		if attemptOf >= 0 || c.origin == "" || c.target == "" {
			t.fillCallNames(&c, attemptOf, in, sc)
		}
		if c.origin == "" {
			if c.service != "" {
				c.origin = c.service
			} else {
				c.origin = "unknown:" + s.Name
			}
		}
		if c.service != "" {
			originService.add(c.origin, c.service)
		}
		t.Index().Call[i] = int32(len(t.calls))
		t.calls = append(t.calls, c)
	}
	t.inheritProxyTries(kn)
	// A call that timed out has no SERVER child to name the callee; another call to the same
	// origin in the trace may.
	for k := range t.calls {
		c := &t.calls[k]
		if c.service == "" {
			c.service = originService.get(c.origin)
		}
		c.dep = dependencyName(c.service, c.dep, c.origin)
	}
	originService.reset()

	if nClient > 0 {
		t.Index().Ops = sc.bufs.make(nClient, &sc.spare)
	}
	group := sc.group[:0]
	// Root CLIENT spans (a client without a parent span) are grouped together as if under one
	// unseen caller.
	for _, r := range t.Index().Roots {
		if t.Index().Call[r] >= 0 {
			group = append(group, r)
		}
	}
	if len(group) > 0 {
		t.groupCalls(-1, group, nil, seed, skew, sc)
	}
	sc.group = group
	// Deliveries whose publish span is not in the trace are roots too: their broker layers
	// are made before the walk reaches them (see messaging.go).
	t.unseenPublishes(seed, in, sc)
	if !t.bridgeOrphans(skew, sc) {
		for _, i := range t.Index().Order {
			t.inferAt(i, seed, skew, in, sc)
		}
	} else {
		t.inferBridged(seed, skew, in, sc)
	}
	t.finishLoops(sc)
	sc.calls = t.calls
	sc.opStart = append(sc.opStart, int32(len(sc.opCalls)))
	t.Index().Ops = t.refusedOperations(t.Index().Ops)
	return t.Index().Ops
}

// inferAt is inference's step at span i, taken in pre-order (a span after every span above it):
// the operation i works for, then the operations of the calls i makes - its CLIENT children,
// the calls that orphans attached to it stand for, the attempts below the instrumentation of a
// call, and an application's own retry loop over its children.
func (t *trace) inferAt(i int32, seed maphash.Seed, skew int64, in *interner, sc *scratch) {
	if c := t.Index().Call[i]; c >= 0 && t.calls[c].op >= 0 {
		t.Index().Enclosing[i] = t.calls[c].op
	} else if lo := sc.loopOf(i); lo >= 0 {
		t.Index().Enclosing[i] = lo
	} else if p := t.Index().Parent[i]; p >= 0 {
		t.Index().Enclosing[i] = t.Index().Enclosing[p]
	}
	if k := t.Spans[i].Kind; k == spans.KindProducer || k == spans.KindConsumer {
		t.messaging(i, seed, in, sc) // see messaging.go
	}
	group := sc.group[:0]
	for _, ch := range t.Children(int(i)) {
		if t.sentCall(ch) {
			group = append(group, ch)
		}
	}
	isCall := t.sentCall(i)
	if !isCall && len(sc.bridge) > 0 {
		group = t.virtualCalls(i, group, in, sc)
	}
	sc.group = group
	if len(group) > 0 {
		t.groupCalls(int(i), group, t.Enclosing(int(i)), seed, skew, sc)
	}
	if isCall {
		// A CLIENT span whose own CLIENT children go where it goes is a wrapper, not a request on
		// the wire: two instrumentations at two levels (requests over urllib3, a gRPC call span
		// over its attempt spans). Its children are the physical calls; it stays the operation
		// above them.
		c := &t.calls[t.Index().Call[i]]
		for _, ch := range group {
			if cc := &t.calls[t.Index().Call[ch]]; cc.origin == c.origin || cc.service != "" && cc.service == c.service {
				c.below = true
				break
			}
		}
		if t.calls[t.Index().Call[i]].servers >= 2 {
			t.untracedHops(i, t.serverChildren(i, sc), true, seed, in, sc)
		}
		if len(sc.bridge) > 0 {
			if orphans := t.bridgedTo(i, sc); len(orphans) > 0 {
				t.untracedHops(i, orphans, false, seed, in, sc)
			}
		}
	}
	t.appLoops(i, seed, sc)
}

// sentCall reports whether span i is a call that its own service sent: a CLIENT span or an attempt
// span (grpcattempts.go). A SERVER span standing for a lost call (hidden.go) and a CONSUMER span
// standing for a delivery (messaging.go) are calls too, but the callee's side of them: they are
// grouped by the rules that made them, never again as their caller's children.
func (t *trace) sentCall(i int32) bool {
	if t.Index().Call[i] < 0 {
		return false
	}
	k := t.Spans[i].Kind
	return k != spans.KindServer && k != spans.KindConsumer
}

// groupCalls turns the CLIENT children of one caller into operations, appended to the trace's: per
// destination, attempts in start order; overlapping calls are one attempt's copies (hedges to one
// origin, fan-out to several); a call after a success starts a new operation; a call after a
// redirect or 401 is a resend, not a retry. parent is the operation the calls run inside, nil for
// none.
func (t *trace) groupCalls(caller int, calls []int32, parent *analyzer.Operation, seed maphash.Seed, skew int64, sc *scratch) {
	ks := slices.Grow(sc.keyed[:0], len(calls))[:len(calls)]
	sc.keyed = ks
	for k, i := range calls {
		c := &t.calls[t.Index().Call[i]]
		if parent != nil && c.opID != "" && c.opID == parent.ID {
			// The caller's operation id, propagated in baggage: it names the operation
			// above, not this layer's own, so it does not group these calls.
			c.opID = ""
		}
		// Hashes, not concatenated strings: no allocation per call.
		var intent uint64
		if c.service != "" {
			intent = hashStrings(seed, "svc", c.service, c.target)
		} else {
			intent = hashStrings(seed, "origin", c.origin, c.target)
		}
		key := intent
		if c.opID != "" {
			key = hashStrings(seed, "op", c.opID, "")
		}
		ks[k] = keyed{key, intent, i}
	}
	// By grouping key, then start time: one sort, then runs (taken in the order they began, see
	// groupsInOrder). No pairwise matching.
	if len(ks) > 1 {
		slices.SortStableFunc(ks, func(a, b keyed) int {
			if c := cmp.Compare(a.key, b.key); c != 0 {
				return c
			}
			return cmp.Compare(t.Spans[a.idx].StartUnixNano, t.Spans[b.idx].StartUnixNano)
		})
	}
	var callerKnown *known
	if caller >= 0 {
		callerKnown = &sc.known[caller]
	}
	first := len(t.Index().Ops)
	// Occurrences are counted per scope: the caller span, or, when the caller is an INTERNAL
	// span (the reference client wraps each call in an operation span), the nearest SERVER (or
	// other non-INTERNAL) span above it. Four reads in a row under one request are four
	// intents even when each has its own operation span.
	scope := int32(caller)
	for scope >= 0 && t.Spans[scope].Kind == spans.KindInternal && t.Index().Parent[scope] >= 0 && sc.loopOf(scope) < 0 {
		scope = t.Index().Parent[scope]
	}
	occurrence := 0
	var op *analyzer.Operation
	opIdx := int32(-1)
	var cur *analyzer.Attempt
	var curEnd, curAnswer int64
	var curFirst int64      // when the attempt's first call started
	var curSpan *spans.Span // the attempt's first call
	b := &sc.bufs
	var attStart, callStart, originStart int
	closeAttempt := func() {
		if cur != nil {
			cur.Calls = b.calls[callStart:len(b.calls):len(b.calls)]
			cur.Origins = b.origins[originStart:len(b.origins):len(b.origins)]
			callStart, originStart = len(b.calls), len(b.origins)
		}
	}
	closeOp := func() {
		if op != nil {
			closeAttempt()
			op.Attempts = b.att[attStart:len(b.att):len(b.att)]
			attStart = len(b.att)
		}
	}
	attStart, callStart, originStart = len(b.att), len(b.calls), len(b.origins)
	for _, g := range t.groupsInOrder(ks, sc) {
		op, opIdx, cur, curEnd, curAnswer = nil, -1, nil, 0, 0
		for _, kc := range ks[g.lo:g.hi] {
			i := kc.idx
			c := &t.calls[t.Index().Call[i]]
			s := &t.Spans[i]
			start, end := s.StartUnixNano, max(s.StartUnixNano, s.EndUnixNano)
			newAttempt, newOp := true, op == nil
			if cur != nil {
				switch {
				case c.attempt >= 0 && cur.RecordedNumber() >= 0:
					newAttempt = c.attempt != cur.RecordedNumber() && c.kind != string(analyzer.KindFanout)
					newOp = c.attempt < cur.RecordedNumber() && c.opID == ""
				case c.kind == string(analyzer.KindFanout) || c.kind == string(analyzer.KindHedge):
					newAttempt = c.kind == string(analyzer.KindHedge)
				default:
					// Overlap with the attempt in flight means a copy, not a retry. A call
					// that starts within the tolerance of the previous answer is still
					// sequential: whole-millisecond timestamps round that way.
					newAttempt = start >= curAnswer-overlapTolerance
					if newAttempt && cur.Outcome == analyzer.OutcomeOK && !isRedirect(cur.Status) && c.resend <= 0 && c.opID == "" {
						// After a success nothing is retried. A call to another instance
						// started within a millisecond of the attempt's first call is a copy
						// sent together with it (fan-out to replicas too fast to overlap);
						// anything later is the caller's next operation.
						if start <= curFirst+overlapTolerance && !slices.Contains(b.origins[originStart:], c.origin) {
							newAttempt = false
						} else {
							newOp = true
						}
					}
				}
			}
			if newOp {
				closeOp()
				op = t.newOperation(callerKnown, c, parent, sc)
				occurrence = sc.nextOccurrence(scope, kc.intent)
				setIntentKey(op, intentKey(seed, parent, kc.intent, occurrence))
				opIdx = int32(len(t.Index().Ops))
				t.Index().Ops = append(t.Index().Ops, op)
				sc.opStart = append(sc.opStart, int32(len(sc.opCalls)))
				cur = nil
				newAttempt = true
			}
			if newAttempt {
				kind := analyzer.AttemptKind(c.kind)
				prevStatus := ""
				if cur != nil {
					prevStatus = cur.Status
				}
				nAttempts := len(b.att) - attStart
				switch {
				case kind != "":
				case nAttempts == 0:
					kind = analyzer.KindInitial
				case isRedirect(prevStatus) || prevStatus == "401":
					kind = analyzer.AttemptKindResend
				case cur != nil && start < curAnswer-overlapTolerance:
					kind = analyzer.KindHedge
				default:
					kind = analyzer.KindRetry
				}
				backoff := int64(0)
				if c.backoff >= 0 {
					backoff = c.backoff * 1e6
				} else if cur != nil && start >= curEnd {
					backoff = start - curEnd
				} else if cur != nil {
					backoff = max(0, start-curAnswer)
				}
				if cur != nil && c.backoff < 0 && !sameClock(curSpan, s) {
					backoff = -1 // read on two clocks (a callee's SERVER span standing for a lost call)
				}
				closeAttempt()
				// Filled in place, as operations are. Within capacity: cur stays valid.
				if len(b.att) == cap(b.att) {
					b.att = append(b.att, analyzer.Attempt{})
				} else {
					b.att = b.att[:len(b.att)+1]
				}
				cur = &b.att[len(b.att)-1]
				cur.Number, cur.Kind, cur.SpanID = nAttempts+1, kind, s.SpanID
				cur.StartUnixNano, cur.EndUnixNano = start, end
				setRecordedNumber(cur, c.attempt)
				cur.BackoffNanos = backoff
				cur.Outcome, cur.Status = c.outcome, c.status
				curEnd, curAnswer, curFirst, curSpan = end, c.answer, start, s
			} else if c.outcome == analyzer.OutcomeOK && cur.Outcome != analyzer.OutcomeOK {
				// Of several copies, the attempt's outcome is the best one.
				cur.Outcome, cur.Status = c.outcome, c.status
			}
			b.calls = append(b.calls, s.SpanID)
			if !slices.Contains(b.origins[originStart:], c.origin) {
				b.origins = append(b.origins, c.origin)
			}
			cur.EndUnixNano = max(cur.EndUnixNano, end)
			curEnd = max(curEnd, end)
			curAnswer = max(curAnswer, c.answer)
			op.StartUnixNano = min(op.StartUnixNano, start)
			op.EndUnixNano = max(op.EndUnixNano, end)
			if d := c.deadline; d > 0 && op.DeadlineUnixNano == 0 {
				op.DeadlineUnixNano = d
			}
			if c.attempt >= 0 || c.opID != "" {
				op.Inferred = false
			}
			sc.opCalls = append(sc.opCalls, t.Index().Call[i])
			c.op = opIdx
		}
		closeOp()
	}
	for _, op := range t.Index().Ops[first:] {
		if len(op.Attempts) > 0 && op.Terminal == "" {
			last := op.Attempts[len(op.Attempts)-1]
			if last.Outcome == analyzer.OutcomeOK {
				op.Terminal, op.StopReason = "complete", "succeeded"
			} else {
				op.Terminal = "fail-fast"
				if last.Outcome == analyzer.OutcomePermanent {
					op.StopReason = "permanent"
				}
			}
		}
	}
}

// groupsInOrder cuts ks, sorted by grouping key, into its groups (runs of one key) and orders
// them by their first call: its start, then its span id. Each group's first call is its earliest
// (ties: the caller's children are ordered by start, then span id, and the sort is stable), so
// this is the order in which the groups began. The keys are hashes seeded per analyzer: they
// find the groups, but their order must not be the groups' order, for what follows it - the
// order of the trace's operations and, through the occurrence numbering, which operations
// under another caller are copies of which (intent keys, hence logical operations) - would
// then change from one analyzer to the next on the same input.
func (t *trace) groupsInOrder(ks []keyed, sc *scratch) []keyRun {
	runs := sc.runs[:0]
	for lo := 0; lo < len(ks); {
		hi := lo + 1
		for hi < len(ks) && ks[hi].key == ks[lo].key {
			hi++
		}
		runs = append(runs, keyRun{int32(lo), int32(hi)})
		lo = hi
	}
	if len(runs) <= 16 {
		// Most callers have one or two groups: an insertion sort, no call per comparison.
		for i := 1; i < len(runs); i++ {
			r := runs[i]
			j := i
			for ; j > 0 && t.beganAfter(ks[runs[j-1].lo].idx, ks[r.lo].idx); j-- {
				runs[j] = runs[j-1]
			}
			runs[j] = r
		}
	} else {
		slices.SortFunc(runs, func(a, b keyRun) int {
			x, y := ks[a.lo].idx, ks[b.lo].idx
			if t.beganAfter(x, y) {
				return 1
			}
			if x == y {
				return 0
			}
			return -1
		})
	}
	sc.runs = runs
	return runs
}

// beganAfter reports whether span x started after span y: later, or at the same time with a
// greater span id (spans are sorted by id, so the index orders them as their ids do).
func (t *trace) beganAfter(x, y int32) bool {
	sx, sy := t.Spans[x].StartUnixNano, t.Spans[y].StartUnixNano
	return sx > sy || sx == sy && x > y
}

// keyRun is one group of a caller's calls: ks[lo:hi] share a grouping key.
type keyRun struct{ lo, hi int32 }

// keyed is one call of a caller with its grouping keys.
type keyed struct {
	key    uint64 // grouping: the operation id when given, else the destination
	intent uint64 // what was asked, for the intent key (never the per-call operation id)
	idx    int32
}

func isRedirect(status string) bool { return len(status) == 3 && status[0] == '3' }

// newOperation starts an operation with what the caller span and the first call say. The
// operation is carved from the trace's buffers.
func (t *trace) newOperation(callerKnown *known, c *callInfo, parent *analyzer.Operation, sc *scratch) *analyzer.Operation {
	b := &sc.bufs
	s := &t.Spans[c.idx]
	if len(b.slab) == cap(b.slab) {
		// Not reached (a trace has no more operations than calls), but never grow the slab in
		// place: earlier operations are pointed to.
		b.slab = make([]analyzer.Operation, 0, 4)
	}
	// Filled in place (the slab is zeroed): no 250-byte struct copied with a write barrier for
	// each of its pointers.
	b.slab = b.slab[:len(b.slab)+1]
	op := &b.slab[len(b.slab)-1]
	op.TraceID = t.ID
	op.Dependency, op.DependencyService = c.dep, c.service
	op.Parent = parent
	op.Inferred = true
	op.StartUnixNano, op.EndUnixNano = s.StartUnixNano, s.EndUnixNano
	if parent != nil {
		setChildCount(parent, parent.ChildCount()+1)
	}
	src := &sc.known[c.idx]
	if callerKnown != nil {
		cs := callerKnown.s
		op.SpanID = cs.SpanID
		op.Caller = cs.Service()
		if callerKnown.str(wkOpID) != "" {
			src = callerKnown
		}
	} else {
		op.SpanID = s.SpanID
		op.Caller = s.Service()
	}
	op.ID = src.str(wkOpID)
	if op.ID == "" {
		op.ID = c.opID
	}
	if op.ID == "" {
		op.ID = t.hexID(c, b)
	}
	op.Name = src.str(wkOpName)
	if op.Name == "" {
		op.Name = c.target
	}
	op.Owner = src.str(wkOwner)
	if op.Owner == "" {
		op.Owner = op.Caller
	}
	op.Terminal = src.str(wkTerminal)
	op.StopReason = src.str(wkStopReason)
	if d := src.intOr(wkDeadline); d > 0 {
		op.DeadlineUnixNano = d
	}
	return op
}

// hexID is call c's span id in hex (SpanID.String), cut from one string made for the trace's
// calls the first time an operation needs one.
func (t *trace) hexID(c *callInfo, b *opBufs) string {
	k := int(t.Index().Call[c.idx])
	if b.hexIDs == "" {
		var sb strings.Builder
		sb.Grow(16 * len(t.calls))
		var digits [16]byte
		for j := range t.calls {
			id := t.Spans[t.calls[j].idx].SpanID
			hex.Encode(digits[:], id[:])
			sb.Write(digits[:])
		}
		b.hexIDs = sb.String()
	}
	if 16*k+16 > len(b.hexIDs) {
		// A call added after the string was made (the callee's side of an untraced hop): its
		// own string, rather than the whole table again for every such call.
		return t.Spans[c.idx].SpanID.String()
	}
	return b.hexIDs[16*k : 16*k+16]
}

// intentKey identifies what an operation was asked to do, independent of which attempt of its
// parent asked: the same read under the second retry of the layer above has the same key. The
// per-dependency "logical operations" are the distinct keys, so amplification counts every copy
// made by every layer against one request of the top layer.
func intentKey(seed maphash.Seed, parent *analyzer.Operation, key uint64, occurrence int) uint64 {
	var pk uint64
	if parent != nil {
		pk = parent.IntentKey()
	}
	var buf [24]byte
	binary.LittleEndian.PutUint64(buf[0:], pk)
	binary.LittleEndian.PutUint64(buf[8:], uint64(occurrence))
	binary.LittleEndian.PutUint64(buf[16:], key)
	return maphash.Bytes(seed, buf[:])
}

// hashStrings hashes a few strings with separators, without building the joined string.
func hashStrings(seed maphash.Seed, a, b, c string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	h.WriteString(a)
	h.WriteByte(0)
	h.WriteString(b)
	h.WriteByte(0)
	h.WriteString(c)
	return h.Sum64()
}

// nextOccurrence numbers the operations of one intent within one scope, in the order they are
// made (pre-order, siblings by start time).
func (sc *scratch) nextOccurrence(scope int32, intent uint64) int {
	k := scopeIntent{scope, intent}
	if sc.occurrences == nil {
		// Few per trace: a slice, becoming a map past 16 (ten thousand distinct siblings).
		for i := range sc.occList {
			if sc.occList[i].k == k {
				sc.occList[i].n++
				return sc.occList[i].n - 1
			}
		}
		sc.occList = append(sc.occList, occCount{k, 1})
		if len(sc.occList) > 16 {
			sc.occurrences = make(map[scopeIntent]int, 64)
			for _, o := range sc.occList {
				sc.occurrences[o.k] = o.n
			}
		}
		return 0
	}
	n := sc.occurrences[k]
	sc.occurrences[k] = n + 1
	return n
}

type occCount struct {
	k scopeIntent
	n int
}

type scopeIntent struct {
	scope  int32
	intent uint64
}

// indexEndOfAuthority is strings.IndexAny(s, "/?#"), and indexEndOfPath strings.IndexAny(s, "?#"),
// without building a character set on every call (they run for every URL of every call).
func indexEndOfAuthority(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == '?' || c == '#' {
			return i
		}
	}
	return -1
}

func indexEndOfPath(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '?' || c == '#' {
			return i
		}
	}
	return -1
}
