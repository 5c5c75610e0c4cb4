package engine

import "github.com/stormwatch/stormwatch/spans"

// A span's attributes as inference reads them: indexed once per span by a number per attribute
// inference asks about, instead of a scan of the span's attributes per question.

// wk numbers the span attributes inference reads. A span's attributes are read once, into a
// [known], and inference then finds each by its number, where looking them up by key would scan
// the span's attributes many times over per CLIENT span (origin, target, outcome, attempt hints,
// the operation's fields).
type wk uint8

const (
	wkURLFull wk = iota
	wkLegacyHTTPURL
	wkLegacyHTTPTarget
	wkURLPath
	wkHTTPRoute
	wkHTTPMethod
	wkLegacyHTTPMethod
	wkURLScheme
	wkServerAddress
	wkServerPort
	wkLegacyNetPeerName
	wkLegacyNetPeerPort
	wkNetworkPeerAddress
	wkNetworkPeerPort
	wkRPCSystem
	wkRPCService
	wkRPCMethod
	wkRPCStatus
	wkRPCGRPCStatus
	wkGRPCPreviousAttempts
	wkHTTPStatus
	wkLegacyHTTPStatusCode
	wkHTTPResendCount
	wkErrorType
	wkExceptionType
	wkExceptionMessage
	wkOutcome
	wkAttempt
	wkAttemptKind
	wkOpID
	wkOpName
	wkOwner
	wkTerminal
	wkStopReason
	wkDeadline
	wkBackoff
	wkEnvoyAttempt
	wkUpstreamCluster
	wkGRPCAttemptPrevious
	// How long the caller waits, and outcomes in legacy tags: see giveup.go and envoy.go.
	wkReqHeaderDeadline
	wkReqHeaderGRPCTimeout
	wkGRPCMetadataTimeout
	wkEnvoyGRPCTimeout
	wkEnvoyExpectedRqMs
	wkEnvoyPerTryMs
	wkLegacyError
	wkResponseFlags
	wkRetryCount
	wkEnvoyGRPCStatus
	wkPeerService
	nWK
)

// known.present has a bit per number: a 65th attribute does not compile.
var _ [64 - nWK]struct{}

// wkKeys are the attribute keys by number (for spans too large for a [known] index).
var wkKeys = [nWK]string{
	wkURLFull:              spans.AttrURLFull,
	wkLegacyHTTPURL:        spans.AttrLegacyHTTPURL,
	wkLegacyHTTPTarget:     spans.AttrLegacyHTTPTarget,
	wkURLPath:              spans.AttrURLPath,
	wkHTTPRoute:            spans.AttrHTTPRoute,
	wkHTTPMethod:           spans.AttrHTTPMethod,
	wkLegacyHTTPMethod:     spans.AttrLegacyHTTPMethod,
	wkURLScheme:            spans.AttrURLScheme,
	wkServerAddress:        spans.AttrServerAddress,
	wkServerPort:           spans.AttrServerPort,
	wkLegacyNetPeerName:    spans.AttrLegacyNetPeerName,
	wkLegacyNetPeerPort:    spans.AttrLegacyNetPeerPort,
	wkNetworkPeerAddress:   spans.AttrNetworkPeerAddress,
	wkNetworkPeerPort:      spans.AttrNetworkPeerPort,
	wkRPCSystem:            spans.AttrRPCSystem,
	wkRPCService:           spans.AttrRPCService,
	wkRPCMethod:            spans.AttrRPCMethod,
	wkRPCStatus:            spans.AttrRPCStatus,
	wkRPCGRPCStatus:        spans.AttrRPCGRPCStatus,
	wkGRPCPreviousAttempts: spans.AttrGRPCPreviousAttempts,
	wkHTTPStatus:           spans.AttrHTTPStatus,
	wkLegacyHTTPStatusCode: spans.AttrLegacyHTTPStatusCode,
	wkHTTPResendCount:      spans.AttrHTTPResendCount,
	wkErrorType:            spans.AttrErrorType,
	wkExceptionType:        "exception.type",
	wkExceptionMessage:     "exception.message",
	wkOutcome:              spans.AttrOutcome,
	wkAttempt:              spans.AttrAttempt,
	wkAttemptKind:          spans.AttrAttemptKind,
	wkOpID:                 spans.AttrOpID,
	wkOpName:               spans.AttrOpName,
	wkOwner:                spans.AttrOwner,
	wkTerminal:             spans.AttrTerminal,
	wkStopReason:           spans.AttrStopReason,
	wkDeadline:             spans.AttrDeadline,
	wkBackoff:              spans.AttrBackoff,
	wkEnvoyAttempt:         spans.AttrReqHeaderEnvoyAttempt,
	wkUpstreamCluster:      spans.AttrEnvoyUpstreamCluster,
	wkGRPCAttemptPrevious:  spans.AttrGRPCAttemptPrevious,

	wkReqHeaderDeadline:    spans.AttrReqHeaderDeadline,
	wkReqHeaderGRPCTimeout: spans.AttrReqHeaderGRPCTimeout,
	wkGRPCMetadataTimeout:  spans.AttrGRPCMetadataTimeout,
	wkEnvoyGRPCTimeout:     spans.AttrEnvoyGRPCTimeout,
	wkEnvoyExpectedRqMs:    spans.AttrReqHeaderEnvoyExpectedRqMs,
	wkEnvoyPerTryMs:        spans.AttrReqHeaderEnvoyPerTryMs,
	wkLegacyError:          spans.AttrLegacyError,
	wkResponseFlags:        spans.AttrEnvoyResponseFlags,
	wkRetryCount:           spans.AttrEnvoyRetryCount,
	wkEnvoyGRPCStatus:      spans.AttrEnvoyGRPCStatus,
	wkPeerService:          spans.AttrPeerService,
}

// wkByIndex is wkOf of each key of spans.WellKnown, by its index (spans.KeyIndex): 0 for a key
// to number with wkOf, 1 for one inference does not read, w+2 for wk w. A span's keys are
// nearly all those strings, and numbering them by address is a table lookup where the switch of
// wkOf compares strings several times over.
var wkByIndex = func() (t [256]uint8) {
	for i, key := range spans.WellKnown {
		if i >= len(t) || spans.KeyIndex(key) != i {
			continue // the list changed since the spans package started: wkOf decides
		}
		t[i] = 1
		if w, ok := wkOf(key); ok {
			t[i] = uint8(w) + 2
		}
	}
	return t
}()

// wkOf numbers a key; false for keys inference does not read. The decoders intern well-known keys,
// so the comparisons below mostly end at a pointer compare. It is one case per attribute of wk's
// list, over 100 lines: a table read top to bottom, which a split would only scatter.
func wkOf(key string) (wk, bool) {
	switch key {
	case spans.AttrURLFull:
		return wkURLFull, true
	case spans.AttrLegacyHTTPURL:
		return wkLegacyHTTPURL, true
	case spans.AttrLegacyHTTPTarget:
		return wkLegacyHTTPTarget, true
	case spans.AttrURLPath:
		return wkURLPath, true
	case spans.AttrHTTPRoute:
		return wkHTTPRoute, true
	case spans.AttrHTTPMethod:
		return wkHTTPMethod, true
	case spans.AttrLegacyHTTPMethod:
		return wkLegacyHTTPMethod, true
	case spans.AttrURLScheme:
		return wkURLScheme, true
	case spans.AttrServerAddress:
		return wkServerAddress, true
	case spans.AttrServerPort:
		return wkServerPort, true
	case spans.AttrLegacyNetPeerName:
		return wkLegacyNetPeerName, true
	case spans.AttrLegacyNetPeerPort:
		return wkLegacyNetPeerPort, true
	case spans.AttrNetworkPeerAddress:
		return wkNetworkPeerAddress, true
	case spans.AttrNetworkPeerPort:
		return wkNetworkPeerPort, true
	case spans.AttrRPCSystem:
		return wkRPCSystem, true
	case spans.AttrRPCService:
		return wkRPCService, true
	case spans.AttrRPCMethod:
		return wkRPCMethod, true
	case spans.AttrRPCStatus:
		return wkRPCStatus, true
	case spans.AttrRPCGRPCStatus:
		return wkRPCGRPCStatus, true
	case spans.AttrGRPCPreviousAttempts:
		return wkGRPCPreviousAttempts, true
	case spans.AttrHTTPStatus:
		return wkHTTPStatus, true
	case spans.AttrLegacyHTTPStatusCode:
		return wkLegacyHTTPStatusCode, true
	case spans.AttrHTTPResendCount:
		return wkHTTPResendCount, true
	case spans.AttrErrorType:
		return wkErrorType, true
	case "exception.type":
		return wkExceptionType, true
	case "exception.message":
		return wkExceptionMessage, true
	case spans.AttrOutcome:
		return wkOutcome, true
	case spans.AttrAttempt:
		return wkAttempt, true
	case spans.AttrAttemptKind:
		return wkAttemptKind, true
	case spans.AttrOpID:
		return wkOpID, true
	case spans.AttrOpName:
		return wkOpName, true
	case spans.AttrOwner:
		return wkOwner, true
	case spans.AttrTerminal:
		return wkTerminal, true
	case spans.AttrStopReason:
		return wkStopReason, true
	case spans.AttrDeadline:
		return wkDeadline, true
	case spans.AttrBackoff:
		return wkBackoff, true
	case spans.AttrReqHeaderEnvoyAttempt:
		return wkEnvoyAttempt, true
	case spans.AttrEnvoyUpstreamCluster:
		return wkUpstreamCluster, true
	case spans.AttrGRPCAttemptPrevious:
		return wkGRPCAttemptPrevious, true
	case spans.AttrReqHeaderDeadline:
		return wkReqHeaderDeadline, true
	case spans.AttrReqHeaderGRPCTimeout:
		return wkReqHeaderGRPCTimeout, true
	case spans.AttrGRPCMetadataTimeout:
		return wkGRPCMetadataTimeout, true
	case spans.AttrEnvoyGRPCTimeout:
		return wkEnvoyGRPCTimeout, true
	case spans.AttrReqHeaderEnvoyExpectedRqMs:
		return wkEnvoyExpectedRqMs, true
	case spans.AttrReqHeaderEnvoyPerTryMs:
		return wkEnvoyPerTryMs, true
	case spans.AttrLegacyError:
		return wkLegacyError, true
	case spans.AttrEnvoyResponseFlags:
		return wkResponseFlags, true
	case spans.AttrEnvoyRetryCount:
		return wkRetryCount, true
	case spans.AttrEnvoyGRPCStatus:
		return wkEnvoyGRPCStatus, true
	case spans.AttrPeerService:
		return wkPeerService, true
	}
	return 0, false
}

// known is one span with the position of each attribute inference reads, found in one pass over
// its attributes. Lookups answer exactly as [spans.Span.Attr] does: the first attribute with the
// key.
type known struct {
	s *spans.Span
	// at[k] is 1 + the index of the first attribute numbered k, 0 when there is none or the span
	// is scanned (scan).
	at [nWK]uint8
	// present is the set of attributes the span has, bit k for number k (so nWK is at most 64):
	// most questions about a call are of attributes it does not have, answered by one test.
	present uint64
	// scan: the span has more attributes than at can index; lookups scan them instead.
	scan bool
	// carriedBits is the set of c's keys that the span has, one bit each (see carriedIndex.bit), for
	// the c read was given.
	carriedBits uint64
	// ingress is ingressApp's answer for the span plus 2, 0 until it is asked: the sidecar rule
	// is asked of one SERVER span once per call under it, and must not walk its children each time.
	ingress int32
}

// read indexes s's attributes, and which of c's keys it has (c may be nil: none).
func (k *known) read(s *spans.Span, c *carriedIndex) {
	k.s = s
	k.at = [nWK]uint8{}
	k.present = 0
	k.carriedBits = 0
	k.ingress = 0
	k.scan = len(s.Attrs) >= 255
	for i := range s.Attrs {
		key := s.Attrs[i].Key
		ki := spans.KeyIndex(key)
		// The key's number: by address for the well-known keys' own strings (wkByIndex), by
		// text for any other. Written out here, not called: this runs for every attribute of
		// every span, and a function with wkOf's call in it does not inline.
		code := uint8(0)
		if uint(ki) < uint(len(wkByIndex)) {
			code = wkByIndex[ki]
		}
		if code == 0 {
			if w, ok := wkOf(key); ok {
				code = uint8(w) + 2
			}
		}
		if w := wk(code - 2); code >= 2 && k.present&(1<<w) == 0 {
			k.present |= 1 << w
			if !k.scan {
				k.at[w] = uint8(i + 1)
			}
		}
		if c != nil {
			k.carriedBits |= c.bit(ki, key)
		}
	}
}

func knownOf(s *spans.Span) known {
	var k known
	k.read(s, nil)
	return k
}

// has reports whether the span has attribute w: the cheap test before reading it.
func (k *known) has(w wk) bool { return k.present&(1<<w) != 0 }

// hasAny reports whether the span has any of the attributes of set (bit w for number w).
func (k *known) hasAny(set uint64) bool { return k.present&set != 0 }

// attr is the first attribute numbered w. The accessors are small enough to inline, the scan of
// a span too large for at kept out of line: inference asks a call some twenty questions.
func (k *known) attr(w wk) (spans.Attr, bool) {
	if j := k.at[w]; j > 0 {
		return k.s.Attrs[j-1], true
	}
	if k.scan {
		return k.s.Attr(wkKeys[w])
	}
	return spans.Attr{}, false
}

// str is [spans.Span.Str] for attribute w.
func (k *known) str(w wk) string {
	if !k.has(w) {
		return ""
	}
	return k.strOf(w)
}

// strOf is str for an attribute the span has.
func (k *known) strOf(w wk) string {
	if j := k.at[w]; j > 0 {
		if a := &k.s.Attrs[j-1]; a.Type == spans.ValueString {
			return a.Str
		}
	}
	a, _ := k.attr(w)
	return a.AsString()
}

// intOr is attribute w as an integer (see [spans.Attr.AsInt]), or -1 when absent or not a number.
func (k *known) intOr(w wk) int64 {
	if !k.has(w) {
		return -1
	}
	return k.intOf(w)
}

// intOf is intOr for an attribute the span has.
func (k *known) intOf(w wk) int64 {
	if j := k.at[w]; j > 0 {
		if a := &k.s.Attrs[j-1]; a.Type == spans.ValueInt {
			return a.Num
		}
	}
	if a, ok := k.attr(w); ok {
		if n, ok := a.AsInt(); ok {
			return n
		}
	}
	return -1
}

// headerInt is attribute w as an integer where it may be recorded as a header: a number, or the
// first number in a string or a string array's display form (["2"]); -1 when there is none.
func (k *known) headerInt(w wk) int64 {
	a, ok := k.attr(w)
	if !ok {
		return -1
	}
	if n, ok := a.AsInt(); ok {
		return n
	}
	s := a.AsString()
	n, digits := int64(0), 0
	for i := 0; i < len(s) && digits < 9; i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			n = 10*n + int64(c-'0')
			digits++
		} else if digits > 0 {
			break
		}
	}
	if digits == 0 {
		return -1
	}
	return n
}

// carried is the set of the read's carriedIndex keys that the span has (bit k for key k).
func (k *known) carried() uint64 { return k.carriedBits }

func intAttr(s *spans.Span, key string) int64 {
	if n, ok := s.Int(key); ok {
		return n
	}
	return -1
}
