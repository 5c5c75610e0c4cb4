package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/stormwatch/stormwatch/analyzer/workload"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// writeWorkload writes n spans of the analyzer's synthetic multi-layer workload as OTLP/JSON
// lines of about 512 spans each (a collector recording's shape).
func writeWorkload(tb testing.TB, path string, n int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := workload.NewWorkload(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).UnixNano())
	for done := 0; done < n; {
		b := &spans.Batch{}
		done += w.Fill(b, min(512, n-done))
		line := append(batchJSON(tb, b), '\n')
		if _, err := bw.Write(line); err != nil {
			tb.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// TestAnalyzeHelperProcess is not a test: BenchmarkAnalyzeAgainstPdata runs the test binary again
// with STORMWATCH_ANALYZE_ARGS set, so the command runs in a process of its own whose CPU time and
// peak RSS are its alone. STORMWATCH_ANALYZE_CPUPROFILE=FILE profiles it (go tool pprof FILE).
func TestAnalyzeHelperProcess(t *testing.T) {
	args := os.Getenv("STORMWATCH_ANALYZE_ARGS")
	if args == "" {
		t.Skip("helper process for BenchmarkAnalyzeAgainstPdata")
	}
	stop := startCPUProfile(t, os.Getenv("STORMWATCH_ANALYZE_CPUPROFILE"))
	err := run(context.Background(), append([]string{"analyze"}, strings.Split(args, "\x1f")...), os.Stdin, os.Stdout, os.Stderr)
	code := exitCode(err, os.Stderr)
	stop()
	os.Exit(code)
}

// TestPdataHelperProcess is not a test: BenchmarkAnalyzeAgainstPdata's other arm, run like
// TestAnalyzeHelperProcess when STORMWATCH_PDATA_HELPER is set. It reads standard input line by
// line as analyze does (a line up to analyze's --max-record-bytes default), unmarshals each line
// with pdata's ptrace.JSONUnmarshaler - what the OpenTelemetry Collector's otlpjson receiver and
// file tooling use - drops the result, and prints the number of spans.
func TestPdataHelperProcess(t *testing.T) {
	if os.Getenv("STORMWATCH_PDATA_HELPER") == "" {
		t.Skip("helper process for BenchmarkAnalyzeAgainstPdata")
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var u ptrace.JSONUnmarshaler
	n := 0
	for sc.Scan() {
		td, err := u.UnmarshalTraces(sc.Bytes())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		n += td.SpanCount()
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("{\"spans\": %d}\n", n)
	os.Exit(0)
}

// TestWriteRealisticTraffic is not a test: with STORMWATCH_REALISTIC_SPANS=N and
// STORMWATCH_REALISTIC_OUT=FILE it writes N spans of workload.RealisticTraffic to FILE, for
// `stormwatch analyze` or a profiler by hand, as BenchmarkAnalyzeAgainstPdata feeds them. FILE may
// be a named pipe, so that 10M spans need no disk (the test's own output goes to standard output,
// which is why the stream does not):
//
//	go test -c -o /tmp/sw.test ./cmd/stormwatch && mkfifo /tmp/traffic
//	STORMWATCH_REALISTIC_SPANS=10000000 STORMWATCH_REALISTIC_OUT=/tmp/traffic /tmp/sw.test -test.run '^TestWriteRealisticTraffic$' &
//	stormwatch analyze /tmp/traffic
func TestWriteRealisticTraffic(t *testing.T) {
	v, out := os.Getenv("STORMWATCH_REALISTIC_SPANS"), os.Getenv("STORMWATCH_REALISTIC_OUT")
	if v == "" || out == "" {
		t.Skip("writes a stream when STORMWATCH_REALISTIC_SPANS and STORMWATCH_REALISTIC_OUT are set")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("STORMWATCH_REALISTIC_SPANS=%q: want a positive number of spans", v)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := workload.NewRealisticTraffic(f).WriteSpans(n); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// startCPUProfile profiles the process into path when path is set; the returned func stops it
// (before os.Exit, which runs no deferred call).
func startCPUProfile(t *testing.T, path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// armRun is one run of a helper process over the generated stream.
type armRun struct {
	cpu  time.Duration // the helper's user+system time
	rss  int64         // its peak RSS, bytes
	wall time.Duration
	gen  time.Duration // this process's user+system time meanwhile: the generator, the pipe writes
	// bytesPerSpan is the stream's size over its spans.
	bytesPerSpan float64
}

var inputSpans = regexp.MustCompile(`"spans": (\d+)`)

// runArm starts the test binary as helper (env added), writes n spans of
// workload.RealisticTraffic into its standard input through a pipe, and waits for it. The
// helper must report having read every span written.
func runArm(b *testing.B, env []string, n int64) armRun {
	cmd := exec.Command(os.Args[0], "-test.run=^(TestAnalyzeHelperProcess|TestPdataHelperProcess)$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out := &headWriter{max: 4096}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	before := selfCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	g := workload.NewRealisticTraffic(stdin)
	werr := g.WriteSpans(n)
	stdin.Close()
	err = cmd.Wait()
	r := armRun{wall: time.Since(start), gen: selfCPU() - before, bytesPerSpan: float64(g.Bytes()) / float64(g.Spans())}
	// Exit 1 is analyze finding what the traffic holds (failed payment retries).
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
		b.Fatalf("%s: %v\n%s", env, err, stderr.String())
	}
	if werr != nil {
		b.Fatalf("%s: writing the stream: %v\n%s", env, werr, stderr.String())
	}
	m := inputSpans.FindSubmatch(out.head)
	if m == nil || string(m[1]) != strconv.FormatInt(g.Spans(), 10) {
		b.Fatalf("%s: read %q spans of %d written\n%s", env, m, g.Spans(), stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rss = int64(ru.Maxrss) * 1024
		r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return r
}

// headWriter keeps the first max bytes written (where the report's input counts are) and drops
// the rest: the report lists every finding and may run to megabytes.
type headWriter struct {
	head []byte
	max  int
}

func (w *headWriter) Write(p []byte) (int, error) {
	if k := min(len(p), w.max-len(w.head)); k > 0 {
		w.head = append(w.head, p[:k]...)
	}
	return len(p), nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkAnalyzeAgainstPdata is `stormwatch analyze -` end to end - reading and decoding OTLP/JSON
// lines, assembly, inference, every detector, the JSON report - side by side with pdata's JSON
// unmarshal of the same bytes (TestPdataHelperProcess), each in a process of its own reading a pipe
// that this process fills with workload.RealisticTraffic (about 815 bytes a span, as a
// Collector records real HTTP and gRPC instrumentation). The stream is never on disk, so 10M spans (8 GB) fit, and
// every size is read the same way; the generator's CPU is this process's and counted in neither
// arm (gen-CPU-ns/span says what it was). analyze runs with the defaults a user gets: --settle
// 30s analyzes a trace once the recording has moved 30 s past it and releases its spans (at a
// request a millisecond, about 270k spans held) and forgets it once the recording has moved as
// far again, --max-spans 2,000,000 caps the spans held should traces never settle,
// --max-window-ops 100,000 bounds the cross-trace detectors' window (judged in chunks past that:
// 5 at 1M spans), and the soft memory limit is sized from it (226 MiB).
//
// Each iteration runs analyze, pdata, pdata, analyze, so a load that rises or falls during it
// weighs on both alike; x-pdata-cpu is analyze's CPU over pdata's within an iteration (the goal is
// 1.0 or less), the median over iterations, as are the CPU-ns/span figures; peak RSS is the
// highest of the iteration's runs. An iteration takes longer than the default benchtime, so
// `go test -bench` runs one per -count: tools/analyze-vs-pdata.sh runs -count 3 and prints the
// medians and the flatness across sizes.
//
// Sizes: 100k and 1M spans; 10M with STORMWATCH_ANALYZE_10M=1: 8 GB through each arm, about 2.5
// minutes of pdata and as long as analyze's per-span cost at that size makes it (docs/performance.md
// says what the iteration took).
func BenchmarkAnalyzeAgainstPdata(b *testing.B) {
	if testing.Short() {
		b.Skip("end to end: runs helper processes")
	}
	sizes := []int64{100_000, 1_000_000}
	if os.Getenv("STORMWATCH_ANALYZE_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("spans=%d", n), func(b *testing.B) {
			analyzeEnv := []string{"STORMWATCH_ANALYZE_ARGS=--format\x1fjson\x1f-"}
			if p := os.Getenv("STORMWATCH_ANALYZE_CPUPROFILE"); p != "" {
				analyzeEnv = append(analyzeEnv, fmt.Sprintf("STORMWATCH_ANALYZE_CPUPROFILE=%s.%d", p, n))
			}
			pdataEnv := []string{"STORMWATCH_PDATA_HELPER=1"}
			var ratios, aNs, pNs, genNs, aWall []float64
			var aRSS, pRSS int64
			var bytesPerSpan float64
			for range b.N {
				var a, p [2]armRun
				a[0] = runArm(b, analyzeEnv, n)
				p[0] = runArm(b, pdataEnv, n)
				p[1] = runArm(b, pdataEnv, n)
				a[1] = runArm(b, analyzeEnv, n)
				ratios = append(ratios, float64(a[0].cpu+a[1].cpu)/float64(p[0].cpu+p[1].cpu))
				for i := range 2 {
					aNs = append(aNs, float64(a[i].cpu.Nanoseconds())/float64(n))
					pNs = append(pNs, float64(p[i].cpu.Nanoseconds())/float64(n))
					aWall = append(aWall, a[i].wall.Seconds())
					genNs = append(genNs, float64(a[i].gen.Nanoseconds())/float64(n), float64(p[i].gen.Nanoseconds())/float64(n))
					aRSS, pRSS = max(aRSS, a[i].rss), max(pRSS, p[i].rss)
				}
				bytesPerSpan = a[0].bytesPerSpan
			}
			b.ReportMetric(median(ratios), "x-pdata-cpu")
			b.ReportMetric(median(aNs), "analyze-CPU-ns/span")
			b.ReportMetric(median(pNs), "pdata-CPU-ns/span")
			b.ReportMetric(float64(aRSS)/(1<<20), "analyze-peak-RSS-MiB")
			b.ReportMetric(float64(pRSS)/(1<<20), "pdata-peak-RSS-MiB")
			b.ReportMetric(median(aWall), "analyze-wall-s")
			b.ReportMetric(median(genNs), "gen-CPU-ns/span")
			b.ReportMetric(bytesPerSpan, "B/span")
		})
	}
}

// batchJSON writes a batch as one OTLP/JSON request, as the recorder writes it.
func batchJSON(tb testing.TB, b *spans.Batch) []byte {
	tb.Helper()
	js, err := tracefile.ProtoToJSON(spans.AppendProto(nil, b))
	if err != nil {
		tb.Fatal(err)
	}
	return js
}
