package lab

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/reference"
	"github.com/stormwatch/stormwatch/spans"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestRecordedAddressesAreStable: every CLIENT span of a recording names its origin by the lab's
// stable address (replicas by their instance, repeated names with a suffix), never by the loopback
// port the origin really listens on.
func TestRecordedAddressesAreStable(t *testing.T) {
	for _, tc := range []struct {
		scenario string
		want     []string // the server.address values the recording must hold, sorted
	}{
		{"fanout", []string{"primary-a", "primary-b", "primary-c"}},
		{"layers", []string{"adapter", "adapter-2", "api", "api-2", "dependency", "dependency-2", "edge", "edge-2"}},
		{"post-deadline", []string{"db", "db-2", "report", "report-2"}},
		// The two budget variants record apart: a report does not add them into one origin.
		{"budget", []string{"origin-failing", "origin-failing-2"}},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			if _, err := Record(context.Background(), tc.scenario, keepOpen{exp}); err != nil {
				t.Fatal(err)
			}
			hosts := map[string]bool{}
			for _, s := range exp.GetSpans() {
				for _, kv := range s.Attributes {
					v := kv.Value.String()
					switch kv.Key {
					case spans.AttrServerAddress:
						hosts[v] = true
					case spans.AttrServerPort:
						if kv.Value.AsInt64() != originPort {
							t.Errorf("span %s: server.port %d, want %d", s.Name, kv.Value.AsInt64(), originPort)
						}
					case spans.AttrURLFull:
						if !strings.HasPrefix(v, "http://") || !strings.Contains(v, ":8080/") {
							t.Errorf("span %s: url.full %q is not a lab address", s.Name, v)
						}
					}
					if strings.Contains(v, "127.0.0.1") {
						t.Errorf("span %s: %s=%q names the loopback listener", s.Name, kv.Key, v)
					}
				}
			}
			var got []string
			for h := range hosts {
				got = append(got, h)
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("server.address values %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRecordingsRepeat: two recordings of a scenario are the same span for span, in the same
// order, ids, times and attributes (the addresses among them) included - what lets `make fixtures`
// re-record the lab's fixtures every time. fanout is the hard case: its defect sends to three
// replicas at the same lab instant.
func TestRecordingsRepeat(t *testing.T) {
	for _, scenario := range []string{"fanout", "post-deadline"} {
		record := func() string {
			exp := tracetest.NewInMemoryExporter()
			if _, err := Record(context.Background(), scenario, keepOpen{exp}); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, s := range exp.GetSpans() {
				b.WriteString(s.SpanContext.TraceID().String() + " " + s.SpanContext.SpanID().String() + " " +
					s.Parent.SpanID().String() + " " + s.Name + " " + s.StartTime.String() + " " + s.EndTime.String())
				for _, kv := range s.Attributes {
					b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
				}
				b.WriteString("\n")
			}
			return b.String()
		}
		if a, b := record(), record(); a != b {
			t.Errorf("two recordings of %s differ:\n%s\n---\n%s", scenario, a, b)
		}
	}
}

// TestDialRefusesUnknownNames: the lab's transport reaches only its own origins. A request to any
// other address fails at the dial with a clear error, and nothing is dialled.
func TestDialRefusesUnknownNames(t *testing.T) {
	e := newEnv(context.Background(), Options{Start: FixtureStart})
	var out outcome
	_, err := e.run(func() (*Result, error) {
		c := e.client("caller", naive(1, time.Second), reference.NewRuntime(0))
		out = e.get(c, "http://example.com:8080/x", nil)
		return &Result{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(out.err, errUnknownOrigin) {
		t.Fatalf("request to an unknown name: err %v, want %v", out.err, errUnknownOrigin)
	}
	if !strings.Contains(out.err.Error(), "example.com:8080") {
		t.Errorf("error %q does not say which address was refused", out.err)
	}
	if out.label != labelConnect {
		t.Errorf("outcome %q, want %q", out.label, labelConnect)
	}
}

// TestRefusedOriginByName: an origin whose name maps to a closed port is refused by the system, and
// the error names the lab address, not the port behind it.
func TestRefusedOriginByName(t *testing.T) {
	e := newEnv(context.Background(), Options{Start: FixtureStart})
	var out outcome
	var u string
	_, err := e.run(func() (*Result, error) {
		u = e.refusedOrigin("refused")
		c := e.client("caller", naive(1, time.Second), reference.NewRuntime(0))
		out = e.get(c, u+"/x", nil)
		return &Result{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if u != "http://refused:8080" {
		t.Errorf("refused origin at %q, want http://refused:8080", u)
	}
	if out.label != labelConnect || errors.Is(out.err, errUnknownOrigin) {
		t.Fatalf("outcome %q (%v), want a refused connection", out.label, out.err)
	}
	if msg := out.err.Error(); !strings.Contains(msg, "refused:8080") || strings.Contains(msg, "127.0.0.1") {
		t.Errorf("error %q should name refused:8080 and not the loopback port", msg)
	}
}

// TestOriginNamesRepeat: a name taken twice in a run gets a suffix, so both origins stay reachable
// and their connections apart; replicas are addressed by their instance.
func TestOriginNamesRepeat(t *testing.T) {
	e := newEnv(context.Background(), Options{Start: FixtureStart})
	var first, second, replica *origin
	var outs [3]outcome
	_, err := e.run(func() (*Result, error) {
		first = e.newOrigin("db", always(200, 0), originOptions{})
		second = e.newOrigin("db", always(503, 0), originOptions{})
		replica = e.newOrigin("catalog/Primary_A", always(200, 0), originOptions{})
		c := e.client("caller", naive(1, time.Second), reference.NewRuntime(0))
		outs[0] = e.get(c, first.url+"/x", nil)
		outs[1] = e.get(c, second.url+"/x", nil)
		outs[2] = e.get(c, replica.url+"/x", nil)
		return &Result{}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    *origin
		url  string
		want string
		out  outcome
	}{
		{first, "http://db:8080", "200", outs[0]},
		{second, "http://db-2:8080", "503", outs[1]},
		{replica, "http://primary-a:8080", "200", outs[2]},
	} {
		if c.o.url != c.url {
			t.Errorf("origin %s at %q, want %q", c.o.name, c.o.url, c.url)
		}
		if c.out.label != c.want || c.o.counts().saw != 1 {
			t.Errorf("%s: got %q (origin saw %d), want %s from that origin once", c.url, c.out.label, c.o.counts().saw, c.want)
		}
	}
	if _, err := http.Get("http://" + first.addr); err == nil {
		t.Error("the origin still serves after the run ended")
	}
}
