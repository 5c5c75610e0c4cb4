package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer/analyzertest"
	"github.com/stormwatch/stormwatch/spans"
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
	w := analyzertest.NewWorkload(time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC).UnixNano())
	var line []byte
	for done := 0; done < n; {
		b := &spans.Batch{}
		done += w.Fill(b, min(512, n-done))
		line = spans.AppendJSON(line[:0], b)
		line = append(line, '\n')
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

// TestAnalyzeHelperProcess is not a test: BenchmarkAnalyzeFile runs the test binary again with
// STORMWATCH_ANALYZE_ARGS set, so the command runs in a process of its own whose peak RSS can be
// read.
func TestAnalyzeHelperProcess(t *testing.T) {
	args := os.Getenv("STORMWATCH_ANALYZE_ARGS")
	if args == "" {
		t.Skip("helper process for BenchmarkAnalyzeFile")
	}
	var argv []string
	for _, a := range bytes.Split([]byte(args), []byte{0x1f}) {
		argv = append(argv, string(a))
	}
	err := run(context.Background(), append([]string{"analyze"}, argv...), os.Stdin, os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// BenchmarkAnalyzeFile is `stormwatch analyze` end to end on a 1,000,000-span file: reading and
// decoding OTLP/JSON lines, assembly, inference, every detector, the JSON report - in a separate
// process, reporting wall time per run and the process's peak RSS (getrusage ru_maxrss). The
// goals: under 10 s and under 1 GiB on a 2-core machine.
func BenchmarkAnalyzeFile(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("spans=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "traces.jsonl")
			writeWorkload(b, path, n)
			st, _ := os.Stat(path)
			b.ResetTimer()
			var peak int64
			var cpu time.Duration
			for range b.N {
				cmd := exec.Command(os.Args[0], "-test.run=^TestAnalyzeHelperProcess$")
				cmd.Env = append(os.Environ(), "STORMWATCH_ANALYZE_ARGS=--format\x1fjson\x1f--fail-on\x1fcritical\x1f"+path)
				cmd.Stdout = new(bytes.Buffer)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				// Exit 1 is expected: the workload has retry storms.
				if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
					b.Fatalf("analyze: %v\n%s", err, stderr.String())
				}
				if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
					peak = max(peak, ru.Maxrss*1024)
					cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/span")
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			// CPU time (user+system) tells the cost apart from the machine's load.
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
		})
	}
}
