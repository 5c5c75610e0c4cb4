package analyzer

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/spans"
)

// callInfo is what inference needs of one CLIENT span, computed once.
type callInfo struct {
	idx     int32
	origin  string // scheme://host:port
	service string // the callee's service.name, when a SERVER child (or another call to origin) says
	target  string // method and path, or the RPC method: what was asked
	outcome string
	status  string
	// Reference-client and protocol hints; -1 when absent.
	attempt int64
	resend  int64
	kind    string
	opID    string
	op      *Operation
}

// AttemptKindResend marks a resend that is not a retry: the request sent again after a redirect
// (3xx) or an authentication challenge (401). It does not count as an attempt of a retry loop.
const AttemptKindResend AttemptKind = "resend"

// Outcome classes (resilience.outcome values; inferred from status codes when absent).
const (
	OutcomeOK        = "ok"
	OutcomeRetryable = "retryable"
	OutcomePermanent = "permanent"
	OutcomeTimeout   = "timeout"
	OutcomeCancelled = "cancelled"
	OutcomeRefused   = "refused"
)

var grpcCodes = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
	"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// classify finds a CLIENT span's outcome class and status text.
func classify(s *spans.Span) (outcome, status string) {
	explicit := s.Str(spans.AttrOutcome)
	a, ok := s.Attr(spans.AttrHTTPStatus)
	if !ok {
		a, ok = s.Attr(spans.AttrLegacyHTTPStatusCode)
	}
	if ok {
		status = statusText(a)
	}
	if status != "" {
		code, _ := a.AsInt()
		switch {
		case code >= 200 && code < 400:
			outcome = OutcomeOK
		case code == 408 || code == 425 || code == 429 || code >= 500:
			outcome = OutcomeRetryable
		default:
			outcome = OutcomePermanent
		}
	} else if g := grpcStatus(s); g != "" {
		status = g
		switch g {
		case "OK":
			outcome = OutcomeOK
		case "UNAVAILABLE", "RESOURCE_EXHAUSTED", "ABORTED":
			outcome = OutcomeRetryable
		case "DEADLINE_EXCEEDED":
			outcome = OutcomeTimeout
		case "CANCELLED":
			outcome = OutcomeCancelled
		default:
			outcome = OutcomePermanent
		}
	} else if s.Status == spans.StatusError || s.Str(spans.AttrErrorType) != "" {
		outcome = errorClass(s)
	} else {
		outcome = OutcomeOK
	}
	if explicit != "" {
		outcome = explicit
	}
	return outcome, status
}

// grpcStatus reads either spelling of the gRPC status: the current string attribute or the older
// integer one.
func grpcStatus(s *spans.Span) string {
	a, ok := s.Attr(spans.AttrRPCStatus)
	if !ok {
		a, ok = s.Attr(spans.AttrRPCGRPCStatus)
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
func errorClass(s *spans.Span) string {
	text := strings.ToLower(s.Str(spans.AttrErrorType) + " " + s.StatusMessage + " " + s.Str("exception.type") + " " + s.Str("exception.message"))
	for i := range s.Events {
		for _, a := range s.Events[i].Attrs {
			if a.Key == "exception.message" || a.Key == "exception.type" {
				text += " " + strings.ToLower(a.AsString())
			}
		}
	}
	switch {
	case strings.Contains(text, "deadline") || strings.Contains(text, "timeout") || strings.Contains(text, "timed out"):
		return OutcomeTimeout
	case strings.Contains(text, "cancel"):
		return OutcomeCancelled
	case strings.Contains(text, "circuit") || strings.Contains(text, "breaker") || strings.Contains(text, "budget"):
		return OutcomeRefused
	}
	return OutcomeRetryable
}

// StatusText is the outcome key used in DependencyStats.Outcomes: the status when there is one,
// otherwise the class ("timeout", "connect error", ...).
func statusKey(outcome, status string) string {
	if status != "" {
		return status
	}
	if outcome == OutcomeRetryable {
		return "connect error"
	}
	return outcome
}

// originOf finds scheme://host:port of a CLIENT span.
func originOf(s *spans.Span) string {
	if u := s.Str(spans.AttrURLFull); u != "" {
		if o := originOfURL(u); o != "" {
			return o
		}
	}
	if u := s.Str(spans.AttrLegacyHTTPURL); u != "" {
		if o := originOfURL(u); o != "" {
			return o
		}
	}
	isRPC := s.Str(spans.AttrRPCSystem) != "" || s.Str(spans.AttrRPCMethod) != ""
	scheme := s.Str(spans.AttrURLScheme)
	if scheme == "" {
		scheme = "http"
		if isRPC {
			scheme = "grpc"
		}
	}
	host, port := s.Str(spans.AttrServerAddress), s.Str(spans.AttrServerPort)
	if host == "" {
		host, port = s.Str(spans.AttrLegacyNetPeerName), s.Str(spans.AttrLegacyNetPeerPort)
	}
	if host == "" {
		host, port = s.Str(spans.AttrNetworkPeerAddress), s.Str(spans.AttrNetworkPeerPort)
	}
	if host != "" {
		if port == "" {
			port = defaultPort(scheme)
		}
		return scheme + "://" + joinHostPort(host, port)
	}
	if svc := s.Str(spans.AttrRPCService); svc != "" {
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
	if j := strings.IndexAny(rest, "/?#"); j >= 0 {
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
	if j := strings.IndexAny(u, "?#"); j >= 0 {
		u = u[:j]
	}
	return u
}

// targetOf is what a call asked for, independent of which replica it went to: method and path for
// HTTP, the full method for RPC. Span names are not used: they differ by language and protocol.
func targetOf(s *spans.Span) string {
	if m := s.Str(spans.AttrRPCMethod); m != "" {
		if svc := s.Str(spans.AttrRPCService); svc != "" && !strings.Contains(m, "/") {
			return svc + "/" + m
		}
		return m
	}
	method := s.Str(spans.AttrHTTPMethod)
	if method == "" {
		method = s.Str(spans.AttrLegacyHTTPMethod)
	}
	path := ""
	switch {
	case s.Str(spans.AttrURLFull) != "":
		path = pathOfURL(s.Str(spans.AttrURLFull))
	case s.Str(spans.AttrURLPath) != "":
		path = s.Str(spans.AttrURLPath)
	case s.Str(spans.AttrLegacyHTTPURL) != "":
		path = pathOfURL(s.Str(spans.AttrLegacyHTTPURL))
	case s.Str(spans.AttrLegacyHTTPTarget) != "":
		path = pathOfURL(s.Str(spans.AttrLegacyHTTPTarget))
	case s.Str(spans.AttrHTTPRoute) != "":
		path = s.Str(spans.AttrHTTPRoute)
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

// inferOperations groups the CLIENT spans of t into logical operations and links each operation
// to the one it runs inside. It runs in one pre-order pass over the tree, so parents' operations
// exist before their children's; grouping under one caller sorts the caller's calls once, so ten
// thousand siblings cost n log n, not n squared.
func (t *Trace) inferOperations(seed maphash.Seed, skew int64, in *interner) []*Operation {
	n := len(t.Spans)
	// t.call was carved by buildTrace.
	t.enclosing = make([]*Operation, n)
	nClient := 0
	for i := range t.Spans {
		t.call[i] = -1
		if t.Spans[i].Kind == spans.KindClient {
			nClient++
		}
	}
	t.calls = make([]callInfo, 0, nClient)
	// origin -> service, for calls whose callee span is missing; few per trace, so a slice.
	var originService [][2]string
	for i := range t.Spans {
		s := &t.Spans[i]
		if s.Kind != spans.KindClient {
			continue
		}
		c := callInfo{
			idx:     int32(i),
			origin:  in.origin(s),
			target:  in.target(s),
			attempt: intAttr(s, spans.AttrAttempt),
			resend:  intAttr(s, spans.AttrHTTPResendCount),
			kind:    s.Str(spans.AttrAttemptKind),
			opID:    s.Str(spans.AttrOpID),
		}
		if c.resend < 0 {
			c.resend = intAttr(s, spans.AttrGRPCPreviousAttempts)
		}
		c.outcome, c.status = classify(s)
		for _, ch := range t.Children(i) {
			if cs := &t.Spans[ch]; cs.Kind == spans.KindServer && cs.Service() != "" {
				c.service = cs.Service()
				break
			}
		}
		if c.origin == "" {
			if c.service != "" {
				c.origin = c.service
			} else {
				c.origin = "unknown:" + s.Name
			}
		}
		if c.service != "" && !slices.ContainsFunc(originService, func(p [2]string) bool { return p[0] == c.origin }) {
			originService = append(originService, [2]string{c.origin, c.service})
		}
		t.call[i] = int32(len(t.calls))
		t.calls = append(t.calls, c)
	}
	// A call that timed out has no SERVER child to name the callee; another call to the same
	// origin in the trace may.
	for k := range t.calls {
		if t.calls[k].service == "" {
			for _, p := range originService {
				if p[0] == t.calls[k].origin {
					t.calls[k].service = p[1]
				}
			}
		}
	}

	var ops []*Operation
	var group []int32
	// Root CLIENT spans (a client without a parent span) are grouped together as if under one
	// unseen caller.
	for _, r := range t.roots {
		if t.call[r] >= 0 {
			group = append(group, r)
		}
	}
	if len(group) > 0 {
		ops = t.groupCalls(ops, -1, group, nil, seed, skew)
	}
	for _, i := range t.order {
		if c := t.call[i]; c >= 0 && t.calls[c].op != nil {
			t.enclosing[i] = t.calls[c].op
		} else if p := t.parent[i]; p >= 0 {
			t.enclosing[i] = t.enclosing[p]
		}
		group = group[:0]
		for _, ch := range t.Children(int(i)) {
			if t.call[ch] >= 0 {
				group = append(group, ch)
			}
		}
		if len(group) > 0 {
			ops = t.groupCalls(ops, int(i), group, t.enclosing[i], seed, skew)
		}
	}
	return t.refusedOperations(ops)
}

// groupCalls turns the CLIENT children of one caller into operations: per destination, attempts
// in start order; overlapping calls are one attempt's copies (hedges to one origin, fan-out to
// several); a call after a success starts a new operation; a call after a redirect or 401 is a
// resend, not a retry.
func (t *Trace) groupCalls(ops []*Operation, caller int, calls []int32, parent *Operation, seed maphash.Seed, skew int64) []*Operation {
	type keyed struct {
		key    uint64 // grouping: the operation id when given, else the destination
		intent uint64 // what was asked, for the intent key (never the per-call operation id)
		idx    int32
	}
	ks := make([]keyed, len(calls))
	for k, i := range calls {
		c := &t.calls[t.call[i]]
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
	// By destination, then start time: one sort, then runs. No pairwise matching.
	slices.SortStableFunc(ks, func(a, b keyed) int {
		if c := cmp.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(t.Spans[a.idx].StartUnixNano, t.Spans[b.idx].StartUnixNano)
	})
	callerSpan := (*spans.Span)(nil)
	if caller >= 0 {
		callerSpan = &t.Spans[caller]
	}
	first := len(ops)
	// Occurrences are counted per scope: the caller span, or, when the caller is an INTERNAL
	// span (the reference client wraps each call in an operation span), the nearest SERVER (or
	// other non-INTERNAL) span above it. Four reads in a row under one request are four
	// intents even when each has its own operation span.
	scope := int32(caller)
	for scope >= 0 && t.Spans[scope].Kind == spans.KindInternal && t.parent[scope] >= 0 {
		scope = t.parent[scope]
	}
	occurrence := 0
	var op *Operation
	var cur *Attempt
	var curEnd int64
	// The group's attempts, calls and origins are carved out of buffers sized for the
	// caller (attempts and origins never outnumber calls): one allocation each per
	// caller instead of several per operation. Each slice is capped when it is
	// complete, so nothing appended later can spill into a neighbour.
	m := len(ks)
	attBuf := make([]Attempt, 0, m)
	callBuf := make([]spans.SpanID, 0, m)
	originBuf := make([]string, 0, m)
	idxBuf := make([]int32, 0, m)
	var attStart, callStart, originStart, idxStart int
	closeAttempt := func() {
		if cur != nil {
			cur.Calls = callBuf[callStart:len(callBuf):len(callBuf)]
			cur.Origins = originBuf[originStart:len(originBuf):len(originBuf)]
			callStart, originStart = len(callBuf), len(originBuf)
		}
	}
	closeOp := func() {
		if op != nil {
			closeAttempt()
			op.Attempts = attBuf[attStart:len(attBuf):len(attBuf)]
			op.calls = idxBuf[idxStart:len(idxBuf):len(idxBuf)]
			attStart, idxStart = len(attBuf), len(idxBuf)
		}
	}
	for lo := 0; lo < len(ks); {
		hi := lo + 1
		for hi < len(ks) && ks[hi].key == ks[lo].key {
			hi++
		}
		op, cur, curEnd = nil, nil, 0
		for _, kc := range ks[lo:hi] {
			i := kc.idx
			c := &t.calls[t.call[i]]
			s := &t.Spans[i]
			start, end := s.StartUnixNano, max(s.StartUnixNano, s.EndUnixNano)
			newAttempt, newOp := true, op == nil
			if cur != nil {
				switch {
				case c.attempt >= 0 && cur.refNumber >= 0:
					newAttempt = c.attempt != cur.refNumber && c.kind != string(KindFanout)
					newOp = c.attempt < cur.refNumber && c.opID == ""
				case c.kind == string(KindFanout) || c.kind == string(KindHedge):
					newAttempt = c.kind == string(KindHedge)
				default:
					// Overlap with the attempt in flight means a copy, not a retry. A call
					// that starts within the tolerance of the previous end is still
					// sequential: whole-millisecond timestamps round that way.
					newAttempt = start >= curEnd
					if newAttempt && cur.Outcome == OutcomeOK && !isRedirect(cur.Status) && c.resend <= 0 && c.opID == "" {
						newOp = true
					}
				}
			}
			if newOp {
				closeOp()
				op = t.newOperation(callerSpan, c, parent)
				occurrence = t.nextOccurrence(scope, kc.intent)
				op.intent = intentKey(seed, parent, kc.intent, occurrence)
				ops = append(ops, op)
				cur = nil
				newAttempt = true
			}
			if newAttempt {
				kind := AttemptKind(c.kind)
				prevStatus := ""
				if cur != nil {
					prevStatus = cur.Status
				}
				nAttempts := len(attBuf) - attStart
				switch {
				case kind != "":
				case nAttempts == 0:
					kind = KindInitial
				case isRedirect(prevStatus) || prevStatus == "401":
					kind = AttemptKindResend
				case cur != nil && start < curEnd:
					kind = KindHedge
				default:
					kind = KindRetry
				}
				a := Attempt{Number: nAttempts + 1, Kind: kind, SpanID: s.SpanID,
					StartUnixNano: start, EndUnixNano: end, refNumber: c.attempt}
				if b := intAttr(s, spans.AttrBackoff); b >= 0 {
					a.BackoffNanos = b * 1e6
				} else if cur != nil {
					a.BackoffNanos = max(0, start-cur.EndUnixNano)
				}
				closeAttempt()
				attBuf = append(attBuf, a) // within capacity: cur stays valid
				cur = &attBuf[len(attBuf)-1]
				cur.Outcome, cur.Status = c.outcome, c.status
				curEnd = end
			} else if c.outcome == OutcomeOK && cur.Outcome != OutcomeOK {
				// Of several copies, the attempt's outcome is the best one.
				cur.Outcome, cur.Status = c.outcome, c.status
			}
			callBuf = append(callBuf, s.SpanID)
			if !slices.Contains(originBuf[originStart:], c.origin) {
				originBuf = append(originBuf, c.origin)
			}
			cur.EndUnixNano = max(cur.EndUnixNano, end)
			curEnd = max(curEnd, end)
			op.StartUnixNano = min(op.StartUnixNano, start)
			op.EndUnixNano = max(op.EndUnixNano, end)
			if d := intAttr(s, spans.AttrDeadline); d > 0 && op.DeadlineUnixNano == 0 {
				op.DeadlineUnixNano = d
			}
			if c.attempt >= 0 || c.opID != "" {
				op.Inferred = false
			}
			idxBuf = append(idxBuf, t.call[i])
			c.op = op
		}
		closeOp()
		lo = hi
	}
	for _, op := range ops[first:] {
		if len(op.Attempts) > 0 && op.Terminal == "" {
			last := op.Attempts[len(op.Attempts)-1]
			if last.Outcome == OutcomeOK {
				op.Terminal, op.StopReason = "complete", "succeeded"
			} else {
				op.Terminal = "fail-fast"
				if last.Outcome == OutcomePermanent {
					op.StopReason = "permanent"
				}
			}
		}
	}
	return ops
}

func isRedirect(status string) bool { return len(status) == 3 && status[0] == '3' }

// newOperation starts an operation with what the caller span and the first call say.
func (t *Trace) newOperation(callerSpan *spans.Span, c *callInfo, parent *Operation) *Operation {
	s := &t.Spans[c.idx]
	op := &Operation{
		TraceID:           t.ID,
		Dependency:        c.origin,
		DependencyService: c.service,
		Parent:            parent,
		Inferred:          true,
		StartUnixNano:     s.StartUnixNano,
		EndUnixNano:       s.EndUnixNano,
	}
	if parent != nil {
		parent.children++
	}
	src := s
	if callerSpan != nil {
		op.SpanID = callerSpan.SpanID
		op.Caller = callerSpan.Service()
		if callerSpan.Str(spans.AttrOpID) != "" {
			src = callerSpan
		}
	} else {
		op.SpanID = s.SpanID
		op.Caller = s.Service()
	}
	op.ID = src.Str(spans.AttrOpID)
	if op.ID == "" {
		op.ID = c.opID
	}
	if op.ID == "" {
		op.ID = s.SpanID.String()
	}
	op.Name = src.Str(spans.AttrOpName)
	if op.Name == "" {
		op.Name = c.target
	}
	op.Owner = src.Str(spans.AttrOwner)
	if op.Owner == "" {
		op.Owner = op.Caller
	}
	op.Terminal = src.Str(spans.AttrTerminal)
	op.StopReason = src.Str(spans.AttrStopReason)
	if d := intAttr(src, spans.AttrDeadline); d > 0 {
		op.DeadlineUnixNano = d
	}
	return op
}

// intentKey identifies what an operation was asked to do, independent of which attempt of its
// parent asked: the same read under the second retry of the layer above has the same key. The
// per-dependency "logical operations" are the distinct keys, so amplification counts every copy
// made by every layer against one request of the top layer.
func intentKey(seed maphash.Seed, parent *Operation, key uint64, occurrence int) uint64 {
	var pk uint64
	if parent != nil {
		pk = parent.intent
	}
	var buf [24]byte
	for i := range 8 {
		buf[i] = byte(pk >> (8 * i))
		buf[8+i] = byte(uint64(occurrence) >> (8 * i))
		buf[16+i] = byte(key >> (8 * i))
	}
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
func (t *Trace) nextOccurrence(scope int32, intent uint64) int {
	k := scopeIntent{scope, intent}
	if t.occurrences == nil {
		// Few per trace: a slice, becoming a map past 16 (ten thousand distinct siblings).
		for i := range t.occList {
			if t.occList[i].k == k {
				t.occList[i].n++
				return t.occList[i].n - 1
			}
		}
		t.occList = append(t.occList, occCount{k, 1})
		if len(t.occList) > 16 {
			t.occurrences = make(map[scopeIntent]int, 64)
			for _, o := range t.occList {
				t.occurrences[o.k] = o.n
			}
		}
		return 0
	}
	n := t.occurrences[k]
	t.occurrences[k] = n + 1
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
