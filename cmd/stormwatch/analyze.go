package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/tracefile"
)

// analyzeOptions are analyze's flags.
type analyzeOptions struct {
	format   string
	failOn   string
	strict   bool
	policy   string
	whatIf   string
	progress bool
	maxSpans int
	// maxWindowOps is --max-window-ops: the operations the cross-trace detectors judge at once
	// (engine.Config.MaxWindowOps; 0 a quarter of --max-spans, negative none).
	maxWindowOps int
	settle       time.Duration
	// maxRecord bounds one record read from a file, as in replay.
	maxRecord int
	// allowEmpty accepts a file without a span: by default it is an error, since a CI gate must
	// not read an empty or wrong input as a clean audit.
	allowEmpty bool
	// jaeger and since select traces from a Jaeger instead of files.
	jaeger jaegerFlags
	since  time.Duration
	// mem raises the soft memory limit as the input asks (limitMemory); nil does nothing.
	mem *memoryGuard
}

func newAnalyzeCmd(io streams) *cobra.Command {
	var o analyzeOptions
	cmd := &cobra.Command{
		Use:   "analyze [flags] FILE... | analyze --jaeger URL --service NAME [flags]",
		Short: "Audit recorded traces: retry amplification, fan-out, post-deadline work (docs/analyze.md)",
		Long: `analyze reads trace files (OTLP/JSON lines as the OpenTelemetry Collector file exporter and
'stormwatch collect --record' write them, a .json request, length-prefixed protobuf, Jaeger JSON
as the Jaeger UI downloads it, or Zipkin v2 JSON; gzip allowed; '-' is standard input),
rebuilds logical operations from the attempt spans and prints the report (docs/sources.md).

Exit status: 0 when no finding reaches --fail-on (always with --fail-on never), 1 when one does,
2 on a usage error or an unreadable input (the file and line are named): a file that is not a
trace file, or that holds no span (unless --allow-empty).`,
		Example: `  stormwatch analyze traces.jsonl
  stormwatch analyze --format markdown --fail-on warning recordings/*.jsonl >> "$GITHUB_STEP_SUMMARY"
  stormwatch analyze --format markdown --fail-on never recordings/*.jsonl    # report only: exit 0 with findings
  otelcol-export | stormwatch analyze --format json -
  stormwatch analyze --jaeger http://jaeger:16686 --service checkout --since 30m`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.jaeger.url != "" && len(args) > 0 {
				return withExitCode(2, errors.New("give trace files or --jaeger, not both"))
			}
			if o.jaeger.url == "" && len(args) == 0 {
				return withExitCode(2, errors.New("give trace files to analyze, or --jaeger URL --service NAME"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAnalyze(cmd.Context(), io, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "report `FORMAT`: text, json or markdown")
	f.StringVar(&o.failOn, "fail-on", "critical", "exit 1 when a finding has this `SEVERITY` or higher: info, warning, critical; never reports without failing (exit 0 with findings)")
	f.BoolVar(&o.strict, "strict", false, "stop with exit 2 at the first malformed record instead of skipping it")
	f.StringVar(&o.policy, "policy", "", "retry policy `FILE` (docs/policy.md): detector settings and per-class rules")
	f.StringVar(&o.whatIf, "what-if", "", "also predict the calls per dependency under `CHANGES` to per-layer settings, e.g. 'edge.maxAttempts=1,api.maxAttempts=1' (docs/policy.md)")
	f.BoolVar(&o.progress, "progress", false, "report reading progress on stderr (on by default when stderr is a terminal)")
	f.DurationVar(&o.settle, "settle", 30*time.Second, "analyze a trace once no span of it has arrived for this `DURATION` in recorded time, and release its spans (bounds memory on large inputs); 0 holds every span until the end")
	f.IntVar(&o.maxRecord, "max-record-bytes", tracefile.DefaultMaxRecordBytes, "the largest record (line, request) read from a file; a larger one is skipped with a warning")
	f.BoolVar(&o.allowEmpty, "allow-empty", false, "accept a file that holds no span (an empty recording) instead of failing with exit 2")
	o.jaeger.register(f, 100)
	f.DurationVar(&o.since, "since", 15*time.Minute, "with --jaeger: read the traces of the last `DURATION`")
	f.IntVar(&o.maxSpans, "max-spans", engine.DefaultMaxSpans, "spans held at once; beyond it the least recently updated traces are analyzed early and released (negative: no bound)")
	registerWindowOps(f, &o.maxWindowOps)
	// cobra reports flag errors as plain errors; they are usage errors: exit 2.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(2, err) })
	return cmd
}

// failNever is --fail-on never: above every severity, so no finding reaches it (a report-only CI
// step that must not fail on findings, without '|| true' hiding a bad input's exit 2).
const failNever = analyzer.SeverityCritical + 1

// checked reads the flags analyze and diff share: the report's format and --fail-on's severity,
// and a --settle that is not negative. A bad one is a usage error (exit 2).
func (o analyzeOptions) checked() (render.Format, analyzer.Severity, error) {
	format, err := render.ParseFormat(o.format)
	if err != nil {
		return format, 0, withExitCode(2, fmt.Errorf("--format: %w", err))
	}
	failOn := failNever
	if o.failOn != "never" {
		if failOn, err = analyzer.ParseSeverity(o.failOn); err != nil {
			return format, 0, withExitCode(2, fmt.Errorf("--fail-on: unknown value %q: want info, warning, critical, or never (report findings, exit 0)", o.failOn))
		}
	}
	if o.settle < 0 {
		return format, 0, withExitCode(2, fmt.Errorf("--settle: must not be negative, got %s", o.settle))
	}
	return format, failOn, nil
}

func runAnalyze(ctx context.Context, io streams, o analyzeOptions, files []string) error {
	format, failOn, err := o.checked()
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	cfg := o.engineConfig()
	var pol *policy.Policy
	if o.policy != "" {
		p, err := policy.Load(o.policy, cfg.Detectors)
		if err != nil {
			return withExitCode(2, err)
		}
		policy.Configure(&cfg.Detectors, &cfg.Settings, p, policy.Offline)
		pol = p
	}
	changes, err := whatIfChanges(o.whatIf, pol)
	if err != nil {
		return withExitCode(2, err)
	}
	if len(changes) > 0 {
		cfg.ForgetAfter = 0 // the prediction replays every operation at the end
	}
	o.mem = limitMemory(cfg)
	a := engine.New(cfg)
	prog := newProgress(io.err, o.progress)
	var inputNotes []string
	var traceURL string
	if o.jaeger.url != "" {
		notes, url, err := readJaeger(ctx, a, o)
		if err != nil {
			return withExitCode(2, err)
		}
		inputNotes, traceURL = notes, url
	}
	for _, file := range files {
		notes, err := readInto(ctx, a, file, io, o, prog)
		if err != nil {
			return withExitCode(2, err)
		}
		inputNotes = append(inputNotes, notes...)
	}
	prog.done()
	a.Flush()
	rep := a.Report()
	// What the reader skipped or doubted is part of what the report is about, not only a line on
	// stderr.
	rep.Notes = append(rep.Notes, inputNotes...)
	rep.TraceURL = traceURL
	if err := writeAnalysis(io.out, format, &rep, a, changes); err != nil {
		return withExitCode(2, err)
	}
	for _, f := range rep.Findings {
		if f.Severity >= failOn {
			return withExitCode(1, nil)
		}
	}
	return nil
}

// readInto feeds one file's records to the analyzer. Malformed records are skipped with a warning
// on stderr (the file and line named) unless strict; notes say how many for the report, and how
// many spans are stamped more than a day ahead of this machine's clock. A
// file that cannot be read at all, that is not a trace file, with no readable record, or with no
// span (unless allowEmpty) is an error.
func readInto(ctx context.Context, a *engine.Engine, file string, io streams, o analyzeOptions, prog *progress) (notes []string, err error) {
	strict, settle := o.strict, o.settle > 0
	r, err := tracefile.Open(file, tracefile.ReadOptions{
		MaxRecordBytes: o.maxRecord,
		Strict:         strict,
		Stdin:          io.in,
		OnWarning: func(err error) {
			fmt.Fprintln(io.err, "stormwatch: warning:", termsafe.String(err.Error()))
		},
	})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	records, nspans, nfuture := 0, 0, 0
	future := time.Now().Add(24 * time.Hour).UnixNano()
	for {
		rec, err := r.Next()
		if errors.Is(err, errEOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		records++
		o.mem.check()
		nspans += len(rec.Batch.Spans)
		prog.add(file, len(rec.Batch.Spans))
		end := int64(0)
		for i := range rec.Batch.Spans {
			// A span stamped in the future (a wrong clock) must not move the recording's
			// clock there: every trace after it would count as settled at once, its chains cut.
			// The report notes such spans.
			sp := &rec.Batch.Spans[i]
			if sp.StartUnixNano > future || sp.EndUnixNano > future {
				nfuture++
				continue
			}
			end = max(end, sp.EndUnixNano)
		}
		if settle && end > 0 {
			// The recording's clock: the latest end time read so far. Ticked before the batch
			// goes in, so its spans are stamped with it.
			a.Settle(time.Unix(0, end))
		}
		if err := a.ConsumeBatch(ctx, rec.Batch); err != nil {
			return nil, fmt.Errorf("%s: %w", rec.Pos, err)
		}
	}
	if records == 0 && r.Skipped() > 0 {
		return nil, fmt.Errorf("%s: no readable record (%d malformed)", r.Name(), r.Skipped())
	}
	if nspans == 0 && !o.allowEmpty {
		return nil, fmt.Errorf("%s: no spans (%d records read); --allow-empty accepts a file without spans", r.Name(), records)
	}
	if n := r.Skipped(); n > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d records skipped, malformed or cut short, their spans not analyzed; the first: %v", r.Name(), n, r.Warnings()[0]))
	}
	for _, tear := range r.Tears() {
		notes = append(notes, r.Name()+": "+tear)
	}
	if nfuture > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d spans have times more than a day ahead of this machine's clock (a host's clock or an exporter is wrong): their timing is meaningless", r.Name(), nfuture))
	}
	return notes, nil
}

var errEOF = io.EOF

// defaultWindowOps is --max-window-ops' default: the cross-trace detectors judge a recording of
// up to this many operations at once, a larger one in chunks of this many. A chunk is held packed
// (about 200 bytes an operation) and read back as values (about 450 bytes each) for the moment it
// is judged, and is what analyze's peak memory follows: with this bound a recording of any length
// peaks at about 230-240 MiB (docs/performance.md, "Peak memory"), where a quarter of
// --max-spans (500,000) peaked at 530-780 MiB.
const defaultWindowOps = 100_000

// registerWindowOps adds --max-window-ops, which analyze and diff share.
func registerWindowOps(f *pflag.FlagSet, ops *int) {
	f.IntVar(ops, "max-window-ops", defaultWindowOps, "operations the cross-trace detectors judge at once; a recording with more is judged in chunks of this many, one after another (the report notes it); memory follows it, about 900 bytes an operation; 0: a quarter of --max-spans; negative: the whole recording at once")
}

// progress reports spans read on stderr, at most once a second, when asked or when stderr is a
// terminal: a million-span file takes a few seconds and should not look hung.
type progress struct {
	w     io.Writer
	on    bool
	spans int
	last  time.Time
	shown bool
	now   func() time.Time // time.Now; tests set their own
}

func newProgress(w io.Writer, forced bool) *progress {
	on := forced
	if f, ok := w.(*os.File); ok && !on {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{w: w, on: on, last: time.Now(), now: time.Now}
}

func (p *progress) add(file string, n int) {
	p.spans += n
	if !p.on || p.now().Sub(p.last) < time.Second {
		return
	}
	p.last = p.now()
	p.shown = true
	fmt.Fprintf(p.w, "stormwatch: read %d spans (%s)\n", p.spans, file)
}

func (p *progress) done() {
	if p.on && p.shown {
		fmt.Fprintf(p.w, "stormwatch: read %d spans; analyzing\n", p.spans)
	}
}

// engineConfig is the analyzer as `analyze` and `diff` run it over a recording. Offline, time is
// the recording's: a trace is complete once the recording has moved on by --settle past its last
// span. Analyzed traces release their spans and are remembered for another --settle, so that spans
// arriving that late are noted as late, then forgotten: what is held follows the recording's rate,
// not its length. A caller that reads every operation at the end (a what-if prediction) sets
// ForgetAfter back to 0.
func (o analyzeOptions) engineConfig() engine.Config {
	return engine.Config{MaxSpans: o.maxSpans, Detectors: suite.Default(), Settle: o.settle,
		ReleaseSpans: o.settle > 0, ForgetAfter: o.settle,
		// The windowed detectors judge every operation once: in Flush, or in chunks as the
		// window reaches its bound (--max-window-ops).
		WindowInterval: -1, MaxWindowOps: o.maxWindowOps,
		// An audit lists every finding.
		MaxFindings: -1}
}
