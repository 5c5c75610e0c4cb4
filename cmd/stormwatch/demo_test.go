package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/stormwatch/stormwatch/tracefile"
)

// TestDemoTrafficReachesTheAnalyzer: the demo's lab scenarios, exported by the OpenTelemetry SDK
// over OTLP to a real collector started by the pipeline the dashboard commands share, come out of
// the session as the 27-call storm - and out of its /metrics and /api/v1/report; C (Clear) empties it.
func TestDemoTrafficReachesTheAnalyzer(t *testing.T) {
	var f collectorFlags
	fs := pflag.NewFlagSet("demo", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	s, err := newSession(&dashboardFlags{analysisFlags: analysisFlags{settle: 200 * time.Millisecond}, refresh: 100 * time.Millisecond}, f.maxSpans, log)
	if err != nil {
		t.Fatal(err)
	}
	p, err := startPipeline(context.Background(), &f, s, log)
	if err != nil {
		t.Fatal(err)
	}
	demo := &demoTraffic{log: log, grpcAddr: p.c.GRPCAddr(), httpAddr: p.c.HTTPAddr()}
	if err := demo.start(p.ctx); err != nil {
		t.Fatal(err)
	}
	if err := demo.start(p.ctx); err != nil { // a second d press does nothing
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	found := false
	for !found && time.Now().Before(deadline) {
		for _, d := range s.Snapshot(time.Now()).Report.Dependencies {
			if d.Amplification == 27 {
				found = true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !found {
		t.Fatalf("the demo's 27-call storm never reached the analyzer: %+v", s.Snapshot(time.Now()).Report.Dependencies)
	}
	if held := s.held(); held.Spans == 0 || held.Traces == 0 {
		t.Errorf("held stats for the collector's metrics: %+v", held)
	}
	eventually(t, func() string {
		if _, body := get(t, "http://"+p.c.HTTPAddr()+"/metrics", ""); !regexp.MustCompile(`(?m)^stormwatch_dependency_amplification_ratio\{.*\} 27$`).MatchString(body) {
			return "the dashboard's /metrics lacks the 27x storm:\n" + grepLines(body, "amplification")
		}
		if code, js := get(t, "http://"+p.c.HTTPAddr()+reportPath, ""); code != http.StatusOK || !strings.Contains(js, `"amplification": 27`) {
			return "the dashboard's report API lacks the 27x storm"
		}
		return ""
	})
	p.cancel()
	demo.wait()
	if err := p.stop(); err != nil {
		t.Error(err)
	}
	s.Clear()
	if snap := s.Snapshot(time.Now()); len(snap.Report.Dependencies) != 0 || snap.Stats.SpansHeld != 0 {
		t.Errorf("Clear left %d dependencies, %d spans", len(snap.Report.Dependencies), snap.Stats.SpansHeld)
	}
}

// TestDashboardFlagErrors: bad flags and a bad policy are reported before anything else (even
// without a terminal), with the flag named, exit 2.
func TestDashboardFlagErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "policy.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", missing}, "--policy"},
		{[]string{"--settle", "0s"}, "--settle 0s: must be positive"},
		{[]string{"--refresh", "-1s"}, "--refresh -1s: must be positive"},
		{[]string{"--queue-size", "0"}, "--queue-size 0"},
		{[]string{"demo", "--token-file", missing}, "demo sends to its own collector in plaintext"},
		{[]string{"demo", "--settle", "0s"}, "--settle 0s"},
	} {
		var out, errb bytes.Buffer
		err := run(context.Background(), c.args, strings.NewReader(""), &out, &errb)
		if code := exitCode(err, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%v)", c.args, code, err)
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: %q lacks %q", c.args, errb.String(), c.want)
		}
		if strings.Contains(errb.String(), "needs a terminal") {
			t.Errorf("%v: the flag error must come before the terminal check: %s", c.args, errb.String())
		}
	}
}

// TestPolicyAppliesLive: --policy reaches the live analyzer: a detector the policy turns off
// reports nothing on the storm fixture, which it otherwise flags.
func TestPolicyAppliesLive(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("version: 1\ndetectors:\n  retry-amplification: {enabled: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	count := func(policyFile string) int {
		s, err := newSession(&dashboardFlags{analysisFlags: analysisFlags{policy: policyFile, settle: time.Millisecond}, refresh: time.Second}, 100_000, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tracefile.Open(stormFixture, tracefile.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			if err := s.ConsumeBatch(context.Background(), rec.Batch); err != nil {
				t.Fatal(err)
			}
		}
		s.cur.Load().Settle(time.Now().Add(time.Hour))
		n := 0
		for _, f := range s.Snapshot(time.Now()).Report.Findings {
			if f.Detector == "retry-amplification" {
				n++
			}
		}
		return n
	}
	if n := count(""); n == 0 {
		t.Fatal("without a policy the storm fixture must be flagged")
	}
	if n := count(pol); n != 0 {
		t.Errorf("with retry-amplification disabled by --policy: %d findings", n)
	}
}
