package engine

import (
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

// TestTimeoutsFromHeaders reads how long a caller waits from each convention it may be recorded
// in, and ignores values that are not one.
func TestTimeoutsFromHeaders(t *testing.T) {
	for _, c := range []struct {
		name  string
		attrs []spans.Attr
		want  int64
	}{
		{"grpc-timeout header as a string array", []spans.Attr{{Key: spans.AttrReqHeaderGRPCTimeout, Type: spans.ValueOther, Str: `["40m"]`}}, int64(40 * time.Millisecond)},
		{"grpc metadata", []spans.Attr{spans.StringAttr(spans.AttrGRPCMetadataTimeout, "2S")}, int64(2 * time.Second)},
		{"Envoy's grpc.timeout tag", []spans.Attr{spans.StringAttr(spans.AttrEnvoyGRPCTimeout, "150000u")}, int64(150 * time.Millisecond)},
		{"Envoy's expected timeout", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderEnvoyExpectedRqMs, "250")}, int64(250 * time.Millisecond)},
		{"the shortest wins", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderEnvoyExpectedRqMs, "250"),
			spans.StringAttr(spans.AttrReqHeaderEnvoyPerTryMs, "[\"20\"]")}, int64(20 * time.Millisecond)},
		{"Envoy's 0 means none", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderEnvoyPerTryMs, "0")}, -1},
		{"a unit that is not one", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderGRPCTimeout, "40x")}, -1},
		{"more than 8 digits", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderGRPCTimeout, "123456789m")}, -1},
		{"no digits", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderGRPCTimeout, "m")}, -1},
		{"a negative number", []spans.Attr{spans.StringAttr(spans.AttrReqHeaderGRPCTimeout, "-5m")}, -1},
		{"nothing", nil, -1},
	} {
		s := spans.Span{Attrs: c.attrs}
		k := knownOf(&s)
		if got := k.timeoutNanos(); got != c.want {
			t.Errorf("%s: timeoutNanos = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestDeadlinesFromAttributes reads an absolute deadline as resilience.deadline or a captured
// Request-Deadline (RFC 3339 or Unix milliseconds), and nothing from a value that is neither.
func TestDeadlinesFromAttributes(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)
	for _, c := range []struct {
		name string
		attr spans.Attr
		want int64
	}{
		{"resilience.deadline", spans.IntAttr(spans.AttrDeadline, at.UnixNano()), at.UnixNano()},
		{"RFC 3339", spans.StringAttr(spans.AttrReqHeaderDeadline, `["2026-11-30T10:00:01.000Z"]`), at.UnixNano()},
		{"Unix ms", spans.StringAttr(spans.AttrReqHeaderDeadline, "1796032801000"), at.UnixNano()},
		{"garbage", spans.StringAttr(spans.AttrReqHeaderDeadline, "tomorrow"), 0},
	} {
		s := spans.Span{Attrs: []spans.Attr{c.attr}}
		k := knownOf(&s)
		if got := k.deadlineAt(); got != c.want {
			t.Errorf("%s: deadlineAt = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestLegacyOutcomes classifies calls whose outcome is only in the tags of Envoy, OpenTracing and
// Zipkin, as a string status code or none.
func TestLegacyOutcomes(t *testing.T) {
	for _, c := range []struct {
		name          string
		attrs         []spans.Attr
		status        spans.StatusCode
		outcome, text string
	}{
		{"a string 503", []spans.Attr{spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "503")}, spans.StatusUnset, analyzer.OutcomeRetryable, "503"},
		{"Envoy's per-try timeout", []spans.Attr{spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "0"),
			spans.StringAttr(spans.AttrEnvoyResponseFlags, "UT"), spans.StringAttr(spans.AttrLegacyError, "true")}, spans.StatusUnset, analyzer.OutcomeTimeout, ""},
		{"Envoy's 504 after timeouts", []spans.Attr{spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "504"),
			spans.StringAttr(spans.AttrEnvoyResponseFlags, "UT,URX")}, spans.StatusUnset, analyzer.OutcomeTimeout, "504"},
		{"Envoy's circuit breaker", []spans.Attr{spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "503"),
			spans.StringAttr(spans.AttrEnvoyResponseFlags, "UO")}, spans.StatusUnset, analyzer.OutcomeRefused, "503"},
		{"downstream hung up", []spans.Attr{spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "0"),
			spans.StringAttr(spans.AttrEnvoyResponseFlags, "DC")}, spans.StatusUnset, analyzer.OutcomeCancelled, ""},
		{"no flags", []spans.Attr{spans.StringAttr(spans.AttrLegacyHTTPStatusCode, "200"),
			spans.StringAttr(spans.AttrEnvoyResponseFlags, "-")}, spans.StatusUnset, analyzer.OutcomeOK, "200"},
		{"error tag true, no status", []spans.Attr{spans.BoolAttr(spans.AttrLegacyError, true)}, spans.StatusUnset, analyzer.OutcomeRetryable, ""},
		{"error tag false", []spans.Attr{spans.StringAttr(spans.AttrLegacyError, "false")}, spans.StatusUnset, analyzer.OutcomeOK, ""},
		{"Envoy's gRPC status", []spans.Attr{spans.StringAttr(spans.AttrEnvoyGRPCStatus, "14")}, spans.StatusUnset, analyzer.OutcomeRetryable, "UNAVAILABLE"},
	} {
		s := spans.Span{Kind: spans.KindClient, Status: c.status, Attrs: c.attrs}
		k := knownOf(&s)
		if outcome, text := classify(&k); outcome != c.outcome || text != c.text {
			t.Errorf("%s: classify = %q %q, want %q %q", c.name, outcome, text, c.outcome, c.text)
		}
	}
}

// TestCalleeNamedByTags: with no SERVER span of the callee, a proxy's upstream_cluster names it,
// else the tracer's peer.service.
func TestCalleeNamedByTags(t *testing.T) {
	both := spans.Span{Attrs: []spans.Attr{spans.StringAttr(spans.AttrPeerService, "stock"), spans.StringAttr(spans.AttrEnvoyUpstreamCluster, "stock-v2")}}
	peer := spans.Span{Attrs: []spans.Attr{spans.StringAttr(spans.AttrPeerService, "stock")}}
	kb, kp := knownOf(&both), knownOf(&peer)
	if got := kb.calleeName(); got != "stock-v2" {
		t.Errorf("calleeName = %q, want the cluster", got)
	}
	if got := kp.calleeName(); got != "stock" {
		t.Errorf("calleeName = %q, want peer.service", got)
	}
}
