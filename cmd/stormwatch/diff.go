package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/diff"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
	"github.com/stormwatch/stormwatch/internal/origin"
	"github.com/stormwatch/stormwatch/internal/termsafe"
	"github.com/stormwatch/stormwatch/internal/words"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// diffOptions are diff's flags; reading shares analyze's.
type diffOptions struct {
	analyzeOptions
	failIfWorse  bool
	tolerance    float64
	beforeWindow string
	afterWindow  string
	tokenFile    string
	timeout      time.Duration
	// token is tokenFile's content, read before either side is.
	token string
}

func newDiffCmd(io streams) *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff [flags] BEFORE AFTER",
		Short: "Compare two recordings, two windows of one, or a live collector with a file: did the fix work (docs/diff.md)",
		Long: `diff analyzes BEFORE and AFTER as 'stormwatch analyze' does and compares them in retry-storm
terms: per dependency and per calling service, calls, intents (what the top layer asked for), amplification
and the product of the retrying layers, before -> after; findings matched by detector and place
(caller -> dependency), not by trace id: resolved, new, persisting. The first line is the verdict.

Each side is a trace file (any format analyze reads; '-' is standard input, for one side), or the
URL of a running 'stormwatch collect' (http://127.0.0.1:4318 or its /api/v1/report), whose live
report is fetched. --before-window and --after-window cut a side to the traces that start in a
time range, FROM..TO: each end an RFC 3339 time (2026-01-01T00:00:30Z) or an offset from the
recording's first span (30s, 1m30s); an empty end is open. With both windows, one recording may
be given for both sides.

Amplification is calls per logical operation, so more traffic after a change is not worse.
--what-if predicts from BEFORE under changed per-layer settings and sets the prediction beside
what AFTER measured, saying where the model was wrong.

Exit status: 0, or 1 with --fail-if-worse when a dependency's amplification grew by more than
--tolerance or a finding at or above --fail-on appeared at a new place; 2 on a usage error or
an unreadable input (the file, line or address named).`,
		Example: `  stormwatch diff before.jsonl after.jsonl
  stormwatch diff --format markdown --fail-if-worse main.jsonl branch.jsonl >> "$GITHUB_STEP_SUMMARY"
  stormwatch diff --before-window ..10m --after-window 15m.. incident.jsonl
  stormwatch diff --what-if 'api.maxAttempts=1,adapter.maxAttempts=1' before.jsonl after.jsonl
  stormwatch diff before.jsonl http://127.0.0.1:4318`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 || len(args) == 1 && o.beforeWindow != "" && o.afterWindow != "" {
				return nil
			}
			return withExitCode(2, fmt.Errorf("diff: want BEFORE and AFTER (or one recording with --before-window and --after-window), got %d argument(s)", len(args)))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDiff(cmd.Context(), io, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "report `FORMAT`: text, json or markdown")
	f.BoolVar(&o.failIfWorse, "fail-if-worse", false, "exit 1 when AFTER is worse: an amplification grew beyond --tolerance, or a new finding at or above --fail-on")
	f.Float64Var(&o.tolerance, "tolerance", diff.DefaultTolerance, "relative growth of a dependency's amplification that is not yet worse (0.05: 5%); also the error beyond which the what-if model was wrong")
	f.StringVar(&o.failOn, "fail-on", "critical", "with --fail-if-worse, the least `SEVERITY` of a new finding that is worse: info, warning, critical; never: new findings alone are not worse")
	f.StringVar(&o.beforeWindow, "before-window", "", "only the traces that start in `FROM..TO` (RFC 3339 times or offsets from the recording's start, e.g. ..10m)")
	f.StringVar(&o.afterWindow, "after-window", "", "`FROM..TO` the same for AFTER, e.g. 15m..")
	f.StringVar(&o.whatIf, "what-if", "", "predict from BEFORE under `CHANGES` to per-layer settings, e.g. 'api.maxAttempts=1', and check it against AFTER (docs/policy.md)")
	f.StringVar(&o.policy, "policy", "", "retry policy `FILE` (docs/policy.md) applied to both sides")
	f.StringVar(&o.tokenFile, "token-file", "", "send the bearer token in `FILE` to a collector URL side (as given to 'stormwatch collect --token-file')")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long (`DURATION`) to wait for a collector URL side")
	f.BoolVar(&o.strict, "strict", false, "stop with exit 2 at the first malformed record instead of skipping it")
	f.DurationVar(&o.settle, "settle", 30*time.Second, "`DURATION`: as analyze's --settle")
	f.IntVar(&o.maxRecord, "max-record-bytes", tracefile.DefaultMaxRecordBytes, "the largest record (line, request) read from a file")
	f.IntVar(&o.maxSpans, "max-spans", engine.DefaultMaxSpans, "spans held at once per side (negative: no bound)")
	registerWindowOps(f, &o.maxWindowOps)
	f.BoolVar(&o.allowEmpty, "allow-empty", false, "accept a recording that holds no span (a side with no traffic) instead of failing with exit 2")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withExitCode(2, err) })
	return cmd
}

func runDiff(ctx context.Context, io streams, o diffOptions, args []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	format, failOn, err := o.checked()
	if err != nil {
		return err
	}
	if o.tolerance < 0 {
		return withExitCode(2, fmt.Errorf("--tolerance: must not be negative, got %g", o.tolerance))
	}
	if o.timeout <= 0 {
		return withExitCode(2, fmt.Errorf("--timeout: must be positive, got %s", o.timeout))
	}
	if o.tokenFile != "" {
		if o.token, err = readToken("--token-file", o.tokenFile); err != nil {
			return withExitCode(2, err)
		}
	}
	beforeWin, err := parseWindow(o.beforeWindow)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--before-window %q: %w", o.beforeWindow, err))
	}
	afterWin, err := parseWindow(o.afterWindow)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--after-window %q: %w", o.afterWindow, err))
	}
	before, after := args[0], args[0]
	if len(args) == 2 {
		after = args[1]
	}
	if before == "-" && after == "-" {
		return withExitCode(2, errors.New("diff: standard input ('-') can be only one side"))
	}
	var pol *policy.Policy
	if o.policy != "" {
		if pol, err = policy.Load(o.policy, suite.Default()); err != nil {
			return withExitCode(2, err)
		}
	}
	changes, err := whatIfChanges(o.whatIf, pol)
	if err != nil {
		return withExitCode(2, err)
	}
	// Sized for the side that holds more: the one a prediction replays holds every operation.
	limits := o.engineConfig()
	if len(changes) > 0 {
		limits.ForgetAfter = 0
	}
	o.mem = limitMemory(limits)
	in := diff.Input{}
	var pred *whatif.Prediction
	if in.Before, in.BeforeLabel, pred, err = diffSide(ctx, io, o, pol, before, beforeWin, changes); err != nil {
		return withExitCode(2, fmt.Errorf("before: %w", err))
	}
	if in.After, in.AfterLabel, _, err = diffSide(ctx, io, o, pol, after, afterWin, nil); err != nil {
		return withExitCode(2, fmt.Errorf("after: %w", err))
	}
	in.Prediction = pred
	rep := diff.Compare(in, diff.Options{Tolerance: o.tolerance, FailOn: failOn})
	if err := render.WriteDiff(io.out, format, &rep); err != nil {
		return withExitCode(2, err)
	}
	if o.failIfWorse && rep.Worse {
		return withExitCode(1, nil)
	}
	return nil
}

// diffSide analyzes one side: a collector's live report, or a recording (cut to win) read as
// analyze reads it. With changes, it also predicts from the side's operations.
func diffSide(ctx context.Context, io streams, o diffOptions, pol *policy.Policy, src string, win window, changes []policy.Change) (*analyzer.Report, string, *whatif.Prediction, error) {
	if isURL(src) {
		if !win.isZero() {
			return nil, "", nil, fmt.Errorf("%s: a window needs a recording; a collector's report is already aggregated", src)
		}
		if len(changes) > 0 {
			return nil, "", nil, fmt.Errorf("%s: --what-if predicts from BEFORE's operations, which a collector's report does not carry; give BEFORE as a recording", src)
		}
		r, err := fetchSettled(ctx, io, src, o.token, o.timeout)
		return r, src, nil, err
	}
	cfg := o.engineConfig()
	if len(changes) > 0 {
		cfg.ForgetAfter = 0 // the prediction replays every operation of this side at the end
	}
	if pol != nil {
		policy.Configure(&cfg.Detectors, &cfg.Settings, pol, policy.Offline)
	}
	a := engine.New(cfg)
	prog := newProgress(io.err, o.progress)
	label := src
	var notes []string
	if win.isZero() {
		n, err := readInto(ctx, a, src, io, o.analyzeOptions, prog)
		if err != nil {
			return nil, "", nil, err
		}
		notes = n
	} else {
		if src == "-" {
			return nil, "", nil, errors.New("a window reads its recording twice (to find its start, then the traces in it): save standard input to a file")
		}
		from, to, err := readWindow(ctx, a, src, io, o.analyzeOptions, win)
		if err != nil {
			return nil, "", nil, err
		}
		label = fmt.Sprintf("%s [%s..%s)", src, from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
		if to.IsZero() {
			label = fmt.Sprintf("%s [%s..)", src, from.UTC().Format(time.RFC3339Nano))
		}
	}
	prog.done()
	a.Flush()
	rep := a.Report()
	// What the reader skipped or doubted belongs to the side's report, as in analyze.
	rep.Notes = append(rep.Notes, notes...)
	var pred *whatif.Prediction
	if len(changes) > 0 {
		// The snapshot's time only stamps it; offline nothing in it depends on the clock.
		ops := a.Snapshot(time.Unix(0, 0)).Operations()
		if err := whatif.CheckLayers(ops, changes); err != nil {
			return nil, "", nil, fmt.Errorf("--what-if: %w", err)
		}
		p := whatif.Predict(ops, changes)
		pred = &p
	}
	return &rep, label, pred, nil
}

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

// settlePoll is how often diff asks a collector whether it has settled what it held.
const settlePoll = 250 * time.Millisecond

// fetchSettled GETs a collector's report once it counts everything the collector held when diff
// asked: the traces that had arrived are analyzed (their settle period passed) and judged by the
// cross-trace detectors, whose findings come seconds later (their next run). A report taken
// sooner reads "better" for identical traffic, the findings not in yet. Within timeout it waits,
// saying so on stderr; past it, it says which part is still pending and gives no verdict.
func fetchSettled(ctx context.Context, io streams, raw, token string, timeout time.Duration) (*analyzer.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r, u, err := fetchReport(ctx, raw, token)
	if err != nil || r.Live == nil {
		return r, err // a report with nothing pending to say: nothing to wait for
	}
	asked := r.Live.AtUnixNano
	var analyzed int64 // when every trace that arrived before asked was in the report
	said := false
	for {
		lv := r.Live
		if analyzed == 0 && lv.SettledThroughUnixNano >= asked {
			analyzed = lv.AtUnixNano
		}
		if analyzed != 0 && lv.WindowThroughUnixNano >= analyzed {
			return r, nil
		}
		if !said {
			fmt.Fprintf(io.err, "stormwatch diff: waiting (at most --timeout %s) for the collector at %s to settle what it holds: %s\n",
				timeout, origin.Redact(*u), pendingPart(lv, analyzed))
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no verdict: the collector at %s has not settled what it held within --timeout %s: %s; "+
				"wait for the traffic to stop, or raise --timeout", origin.Redact(*u), timeout, pendingPart(lv, analyzed))
		case <-time.After(settlePoll):
		}
		next, _, err := fetchReport(ctx, raw, token)
		if err != nil {
			if ctx.Err() != nil {
				continue // the deadline: said above, with what is pending
			}
			return nil, err
		}
		if next.Live == nil {
			return nil, fmt.Errorf("the collector at %s stopped saying what it has pending", origin.Redact(*u))
		}
		r = next
	}
}

// pendingPart says which part of a live report is not in yet.
func pendingPart(lv *analyzer.LiveState, analyzed int64) string {
	if analyzed == 0 {
		return fmt.Sprintf("%s still settling (a trace is analyzed once it has been quiet for the collector's --settle)",
			words.Count(lv.PendingTraces, "trace"))
	}
	every := ""
	if lv.WindowEveryMs > 0 {
		every = fmt.Sprintf(", every %s at least", time.Duration(lv.WindowEveryMs)*time.Millisecond)
	}
	return "the cross-trace findings (retry budget, synchronized retries, breakers) of the latest traces, due at the detectors' next run" + every
}

// fetchReport GETs a collector's live report. A URL without a path means the collector's own
// report path, so the address 'stormwatch collect' prints is enough. token, when not empty, is
// sent as a bearer token. ctx bounds the request.
func fetchReport(ctx context.Context, raw, token string) (*analyzer.Report, *url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", raw, err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = reportPath
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", origin.Redact(*u), err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The token stays with the collector it was given for: no redirect elsewhere with it.
	client := &http.Client{CheckRedirect: origin.CheckRedirect(func() bool { return token != "" })}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message repeats the URL, named below
		}
		return nil, nil, fmt.Errorf("cannot reach the collector at %s: %w (is 'stormwatch collect' running with --http at that address?)", origin.Redact(*u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, nil, fmt.Errorf("GET %s: %s: %s", origin.Redact(*u), resp.Status, termsafe.String(strings.TrimSpace(string(msg))))
	}
	var r analyzer.Report
	dec := json.NewDecoder(io.LimitReader(resp.Body, 256<<20))
	if err := dec.Decode(&r); err != nil {
		return nil, nil, fmt.Errorf("GET %s: not a stormwatch report: %w", origin.Redact(*u), err)
	}
	if r.Version != analyzer.ReportVersion {
		return nil, nil, fmt.Errorf("GET %s: report version %d, this stormwatch reads version %d", origin.Redact(*u), r.Version, analyzer.ReportVersion)
	}
	return &r, u, nil
}

// window is a time range of a recording. Each end is absolute, or an offset from the
// recording's first span; a zero end is open.
type window struct {
	from, to       time.Time
	fromOff, toOff time.Duration
	fromRel, toRel bool
	hasFrom, hasTo bool
}

func (w window) isZero() bool { return !w.hasFrom && !w.hasTo }

// parseWindow reads FROM..TO; an empty string is no window.
func parseWindow(s string) (window, error) {
	var w window
	if s == "" {
		return w, nil
	}
	fromS, toS, ok := strings.Cut(s, "..")
	if !ok {
		return w, errors.New("want FROM..TO, each an RFC 3339 time or an offset from the recording's start such as 30s (either may be empty)")
	}
	fromS, toS = strings.TrimSpace(fromS), strings.TrimSpace(toS)
	if fromS == "" && toS == "" {
		return w, errors.New("both ends are empty: leave the flag out to take the whole recording")
	}
	var err error
	if fromS != "" {
		w.hasFrom = true
		if w.from, w.fromOff, w.fromRel, err = parseWindowEnd(fromS); err != nil {
			return w, fmt.Errorf("FROM: %w", err)
		}
	}
	if toS != "" {
		w.hasTo = true
		if w.to, w.toOff, w.toRel, err = parseWindowEnd(toS); err != nil {
			return w, fmt.Errorf("TO: %w", err)
		}
	}
	if w.hasFrom && w.hasTo && w.fromRel == w.toRel {
		if (w.fromRel && w.toOff <= w.fromOff) || (!w.fromRel && !w.to.After(w.from)) {
			return w, errors.New("TO must be after FROM")
		}
	}
	return w, nil
}

func parseWindowEnd(s string) (time.Time, time.Duration, bool, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, 0, false, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(s, "+"))
	if err != nil {
		return time.Time{}, 0, false, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-01T00:00:30Z) nor an offset (30s, 1m30s)", s)
	}
	if d < 0 {
		return time.Time{}, 0, false, fmt.Errorf("offset %q is before the recording's start", s)
	}
	return time.Time{}, d, true, nil
}

// bounds resolves the window against the recording's start: [from, to), to zero when open.
func (w window) bounds(start time.Time) (from, to time.Time) {
	from = start
	if w.hasFrom {
		from = w.from
		if w.fromRel {
			from = start.Add(w.fromOff)
		}
	}
	if w.hasTo {
		to = w.to
		if w.toRel {
			to = start.Add(w.toOff)
		}
	}
	return from, to
}

// readWindow feeds the analyzer the traces of file that start inside win. A trace is kept or
// left whole, by its earliest span, so no trace is cut in two at an edge: the first pass finds
// each trace's start (and the recording's), the second feeds the kept traces as analyze would.
func readWindow(ctx context.Context, a *engine.Engine, file string, io streams, o analyzeOptions, win window) (time.Time, time.Time, error) {
	starts := map[spans.TraceID]int64{}
	first := int64(0)
	err := eachRecord(file, io, o, func(rec *tracefile.Record) error {
		for i := range rec.Batch.Spans {
			s := &rec.Batch.Spans[i]
			if cur, ok := starts[s.TraceID]; !ok || s.StartUnixNano < cur {
				starts[s.TraceID] = s.StartUnixNano
			}
			// Spans without a time (0) do not say where the recording starts.
			if s.StartUnixNano > 0 && (first == 0 || s.StartUnixNano < first) {
				first = s.StartUnixNano
			}
		}
		return nil
	}, true)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	from, to := win.bounds(time.Unix(0, first))
	in := func(id spans.TraceID) bool {
		t := time.Unix(0, starts[id])
		return !t.Before(from) && (to.IsZero() || t.Before(to))
	}
	kept := 0
	settle := o.settle > 0
	future := time.Now().Add(24 * time.Hour).UnixNano()
	err = eachRecord(file, io, o, func(rec *tracefile.Record) error {
		ss := rec.Batch.Spans[:0]
		for _, s := range rec.Batch.Spans {
			if in(s.TraceID) {
				ss = append(ss, s)
			}
		}
		rec.Batch.Spans = ss
		if len(ss) == 0 {
			return nil
		}
		kept += len(ss)
		o.mem.check()
		end := int64(0)
		for i := range ss {
			// As in readInto: a span stamped in the future must not move the recording's clock.
			if ss[i].StartUnixNano > future || ss[i].EndUnixNano > future {
				continue
			}
			end = max(end, ss[i].EndUnixNano)
		}
		if settle && end > 0 {
			a.Settle(time.Unix(0, end))
		}
		if err := a.ConsumeBatch(ctx, rec.Batch); err != nil {
			return fmt.Errorf("%s: %w", rec.Pos, err)
		}
		return nil
	}, false)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	if kept == 0 {
		return time.Time{}, time.Time{}, fmt.Errorf("%s: no trace starts in the window [%s..%s) (the recording starts at %s)",
			file, from.UTC().Format(time.RFC3339Nano), orOpen(to), time.Unix(0, first).UTC().Format(time.RFC3339Nano))
	}
	return from, to, nil
}

func orOpen(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// eachRecord reads file with analyze's options; warnings about malformed records are printed on
// the first pass only, so a window does not say everything twice.
func eachRecord(file string, io streams, o analyzeOptions, f func(*tracefile.Record) error, warn bool) error {
	r, err := tracefile.Open(file, tracefile.ReadOptions{
		MaxRecordBytes: o.maxRecord,
		Strict:         o.strict,
		Stdin:          io.in,
		OnWarning: func(err error) {
			if warn {
				fmt.Fprintln(io.err, "stormwatch: warning:", termsafe.String(err.Error()))
			}
		},
	})
	if err != nil {
		return err
	}
	defer r.Close()
	records := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, errEOF) {
			break
		}
		if err != nil {
			return err
		}
		records++
		if err := f(rec); err != nil {
			return err
		}
	}
	if records == 0 && r.Skipped() > 0 {
		return fmt.Errorf("%s: no readable record (%d malformed)", r.Name(), r.Skipped())
	}
	return nil
}
