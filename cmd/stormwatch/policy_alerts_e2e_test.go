package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// promServer is a real Prometheus the test started on a free loopback port with a data directory
// of its own; it is stopped (SIGTERM, then waited for) at the end.
type promServer struct {
	url string
	log *collectStderr
}

func startPrometheus(t *testing.T, config string) *promServer {
	t.Helper()
	bin := needProm(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// A free port: Prometheus cannot report the one it got for :0.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	s := &promServer{url: "http://" + addr, log: &collectStderr{}}
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready at %s:\n%s", s.url, s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type promAlertState struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
	Value  string            `json:"value"`
}

// alerts are the alerts Prometheus holds now, pending or firing.
func (s *promServer) alerts(t *testing.T) []promAlertState {
	t.Helper()
	resp, err := http.Get(s.url + "/api/v1/alerts")
	if err != nil {
		t.Fatalf("GET /api/v1/alerts: %v", err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []promAlertState `json:"alerts"`
		} `json:"data"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("alerts: %v: %s", err, b)
	}
	return body.Data.Alerts
}

// replayEvery sends one pass of fixture to the collector at grpc every interval until stopped:
// traffic that keeps the rates alive, one trace at a time.
func replayEvery(t *testing.T, grpc, fixture string, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if err := run(ctx, []string{"replay", "--to", grpc, "--speed", "8", fixture}, strings.NewReader(""), io.Discard, io.Discard); err != nil && ctx.Err() == nil {
				t.Errorf("replay %s: %v", fixture, err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// TestPolicyAlertsFireAndResolveInPrometheus: a real Prometheus scrapes `collect` and evaluates
// the rules `policy alerts` wrote. A replayed storm (8 calls per intent, over the built-in limit
// of 5) makes the amplification alert fire, labelled with the caller and the dependency's
// service; its healthy twin (3 calls per intent) lets it resolve.
func TestPolicyAlertsFireAndResolveInPrometheus(t *testing.T) {
	needProm(t, "prometheus")
	if testing.Short() {
		t.Skip("starts a Prometheus server and waits for its alerts: not with -short")
	}
	dir := t.TempDir()
	rules := writeAlerts(t, dir, "--range", "10s", "--for", "0s")
	c := startCollect(t, "--settle", "200ms", "--status-interval", "0")
	prom := startPrometheus(t, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: stormwatch
    static_configs: [{targets: [%q]}]
`, rules, c.http))

	amplification := func() *promAlertState {
		for _, a := range prom.alerts(t) {
			if a.Labels["alertname"] == "StormwatchAmplificationAboveLimit" && a.Labels["caller"] == "web" {
				return &a
			}
		}
		return nil
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90 s; alerts: %+v\nprometheus log:\n%s\ncollect:\n%s", what, prom.alerts(t), prom.log.String(), c.stderr.String())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	stop := replayEvery(t, c.grpc, "../../fixtures/unbounded-retries-stock.jsonl", 500*time.Millisecond)
	waitUntil("the storm's alert fires", func() bool {
		a := amplification()
		return a != nil && a.State == "firing"
	})
	a := amplification()
	if a.Labels["dependency"] != "catalog" || a.Labels["severity"] != "warning" || a.Labels["policy_class"] != "defaults" {
		t.Errorf("storm alert labels %v; want dependency catalog, severity warning, policy_class defaults", a.Labels)
	}
	stop()

	stop = replayEvery(t, c.grpc, "../../fixtures/unbounded-retries-healthy-stock.jsonl", 500*time.Millisecond)
	defer stop()
	waitUntil("the alert resolves under the healthy twin", func() bool { return amplification() == nil })
}
