package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/suite"
	"github.com/stormwatch/stormwatch/fixtures"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
	"github.com/stormwatch/stormwatch/tracefile/replay"
)

// replayMode is one way of replaying a file into a collector at addresses grpc and http.
type replayMode struct {
	name string
	// passes is how many passes the mode sends.
	passes int
	// speed is the pace the mode keeps (2: twice the recorded one); 0 for as fast as possible.
	speed float64
	send  func(t *testing.T, grpc, http, file string)
	// direct, instead of send, plays file straight into a consumer, as the dashboard does, and
	// records what it was given to rec.
	direct func(t *testing.T, file, rec string)
}

// cliReplay is `stormwatch replay --to ... args... file`.
func cliReplay(to string, args ...string) func(t *testing.T, grpc, http, file string) {
	return func(t *testing.T, grpc, http, file string) {
		t.Helper()
		addr := grpc
		if to == "http" {
			addr = "http://" + http
		}
		argv := append([]string{"replay", "--to", addr}, args...)
		if code, _, stderr := runCLI(t, "", append(argv, file)...); code != 0 {
			t.Fatalf("replay %v: exit %d\n%s", args, code, stderr)
		}
	}
}

var replayModes = []replayMode{
	// Each mode goes over another transport, so all three decoders feed the recording.
	{name: "1x", passes: 1, speed: 1, send: cliReplay("grpc", "--speed", "1")},
	{name: "20x", passes: 1, speed: 20, send: cliReplay("http", "--speed", "20")},
	{name: "max", passes: 1, send: cliReplay("http", "--max", "--protocol", "http/json")},
	// Loops, stopped after their second pass: the library under `--loop`, with a pass count.
	{name: "20x-loop", passes: 2, speed: 20, send: func(t *testing.T, grpc, _, file string) {
		p := replay.NewPlayer([]string{file}, replay.Options{Speed: 20, Loop: true, Passes: 2})
		if _, err := replay.Send(context.Background(), p, replay.SendOptions{Target: replay.Target{Endpoint: grpc}}); err != nil {
			t.Fatal(err)
		}
	}},
	// The dashboard's path: batches shifted in their compact form, no OTLP in between.
	{name: "dashboard-20x-loop", passes: 2, speed: 20, direct: func(t *testing.T, file, rec string) {
		w, err := tracefile.Create(rec)
		if err != nil {
			t.Fatal(err)
		}
		p := replay.NewPlayer([]string{file}, replay.Options{Speed: 20, Loop: true, Passes: 2})
		err = p.PlayTo(context.Background(), spans.ConsumerFunc(func(_ context.Context, b *spans.Batch) error {
			return w.WriteRequest(spans.AppendProto(nil, b), false)
		}))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "max-loop", passes: 2, send: func(t *testing.T, grpc, _, file string) {
		reqs, err := replay.LoadRequests([]string{file}, tracefile.ReadOptions{Strict: true}, replay.GRPC, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := replay.Blast(context.Background(), reqs, replay.SendOptions{Target: replay.Target{Endpoint: grpc}, Connections: 3, Passes: 2}); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestReplayIsFaithfulForEveryFixture replays every fixture in every mode into `stormwatch collect
// --record`, over real OTLP on loopback (and, as the dashboard does, straight into a consumer), and
// holds each pass of the recording to the original:
//   - every span, event and time-valued attribute of a pass moved by one and the same whole-second
//     delta (its timing is the recorded one to the nanosecond), durations and span ids kept, trace
//     ids new (first half kept) and links following them;
//   - `analyze` of the pass says what `analyze` of the original says: input counts, dependency
//     figures, findings (detector, severity, service, dependency, summary, action, evidence but
//     for its instants), notes;
//   - a paced replay took at least the recording's duration at its speed: 1x is really 1x.
func TestReplayIsFaithfulForEveryFixture(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every fixture, at 1x among others")
	}
	for _, name := range fixtures.Names() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			orig := fixture(t, name)
			want := analyzeJSON(t, orig)
			o := readSpans(t, orig)
			for _, m := range replayModes {
				t.Run(m.name, func(t *testing.T) {
					rec := filepath.Join(t.TempDir(), "recording.jsonl")
					var start time.Time
					var took time.Duration
					if m.direct != nil {
						start = time.Now()
						m.direct(t, orig, rec)
						took = time.Since(start)
					} else {
						c := startCollect(t, "--record", rec, "--status-interval", "0", "--queue-size", "4096")
						start = time.Now()
						m.send(t, c.grpc, c.http, orig)
						took = time.Since(start)
						if err := c.stop(t); err != nil {
							t.Fatalf("collect: %v", err)
						}
					}
					if m.speed > 0 {
						if min := time.Duration(float64(o.lastRecord-o.firstRecord) / m.speed); took < min {
							t.Errorf("a %gx replay of a %v recording took %v", m.speed, time.Duration(o.lastRecord-o.firstRecord), took)
						}
					}
					passes := splitPasses(t, o, rec)
					if len(passes) != m.passes {
						t.Fatalf("the recording holds %d passes, want %d", len(passes), m.passes)
					}
					for i, p := range passes {
						if got := analyzeJSON(t, p.file); !reflect.DeepEqual(got, want) {
							t.Errorf("pass %d: analyze of the replay differs from analyze of the file\nreplay: %s\nfile:   %s", i+1, got, want)
						}
						if i == 0 && m.speed == 1 {
							// Shifted to when it was played: its first record's spans end within
							// the second before they were sent.
							if end := o.firstRecord + p.delta; end > start.Add(took).UnixNano() || end < start.Add(-time.Second).UnixNano() {
								t.Errorf("the first record ends at %v, played from %v to %v", time.Unix(0, end), start, start.Add(took))
							}
						}
					}
				})
			}
		})
	}
}

// fileSpans is what the test knows of a trace file.
type fileSpans struct {
	// byID finds a recorded span by its span id and the first half of its trace id (what a
	// replay keeps).
	byID                    map[[16]byte]spans.Span
	n                       int
	firstRecord, lastRecord int64
}

func spanKey(s *spans.Span) [16]byte {
	var k [16]byte
	copy(k[:8], s.SpanID[:])
	copy(k[8:], s.TraceID[:8])
	return k
}

func readSpans(t *testing.T, path string) *fileSpans {
	t.Helper()
	fs := &fileSpans{byID: map[[16]byte]spans.Span{}}
	r, err := tracefile.Open(path, tracefile.ReadOptions{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		var end int64
		for _, s := range rec.Batch.Spans {
			if _, dup := fs.byID[spanKey(&s)]; dup {
				t.Fatalf("%s: span %s of trace %s is not the only one with its id", path, s.SpanID, s.TraceID)
			}
			fs.byID[spanKey(&s)] = s
			fs.n++
			end = max(end, s.EndUnixNano)
		}
		if end != 0 && fs.firstRecord == 0 {
			fs.firstRecord = end
		}
		fs.lastRecord = max(fs.lastRecord, end)
	}
}

// pass is one pass of a replay, cut out of a recording.
type pass struct {
	salt  uint64
	delta int64
	file  string
	spans int
}

// splitPasses cuts a recording of replays of o into one file per pass, telling passes apart by the
// salt their trace ids carry, and checks each span against the one it replays: same span id,
// parent, name, kind, status and attributes, times and time-valued attributes moved by the pass's
// one delta, trace id and links salted alike.
func splitPasses(t *testing.T, o *fileSpans, rec string) []*pass {
	t.Helper()
	r, err := tracefile.Open(rec, tracefile.ReadOptions{Strict: true, Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var passes []*pass
	writers := map[uint64]*tracefile.Writer{}
	seen := map[[24]byte]bool{}
	for {
		x, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var p *pass
		for i := range x.Batch.Spans {
			s := &x.Batch.Spans[i]
			was, ok := o.byID[spanKey(s)]
			if !ok {
				t.Fatalf("recorded span %s of trace %s replays no span of the file", s.SpanID, s.TraceID)
			}
			salt := binary.BigEndian.Uint64(s.TraceID[8:]) ^ binary.BigEndian.Uint64(was.TraceID[8:])
			delta := s.EndUnixNano - was.EndUnixNano
			if p == nil {
				for _, q := range passes {
					if q.salt == salt {
						p = q
					}
				}
				if p == nil {
					if salt == 0 {
						t.Fatalf("span %s kept its recorded trace id %s", s.SpanID, s.TraceID)
					}
					p = &pass{salt: salt, delta: delta, file: filepath.Join(filepath.Dir(rec), fmt.Sprintf("pass%d.jsonl", len(passes)+1))}
					w, err := tracefile.Create(p.file)
					if err != nil {
						t.Fatal(err)
					}
					writers[salt] = w
					passes = append(passes, p)
				}
			}
			if msg := sameSpan(s, &was, p); msg != "" {
				t.Fatalf("span %s of trace %s: %s", s.SpanID, s.TraceID, msg)
			}
			var k [24]byte
			copy(k[:], s.TraceID[:])
			copy(k[16:], s.SpanID[:])
			if seen[k] {
				t.Fatalf("span %s of trace %s recorded twice", s.SpanID, s.TraceID)
			}
			seen[k] = true
			p.spans++
		}
		if p != nil {
			if err := writers[p.salt].WriteRequest(x.Raw, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range passes {
		if err := writers[p.salt].Close(); err != nil {
			t.Fatal(err)
		}
		if p.spans != o.n {
			t.Errorf("a pass holds %d spans of the file's %d", p.spans, o.n)
		}
	}
	return passes
}

// sameSpan says how s fails to be was replayed in pass p, or "".
func sameSpan(s, was *spans.Span, p *pass) string {
	salted := func(id spans.TraceID) spans.TraceID {
		if id.IsZero() {
			return id
		}
		binary.BigEndian.PutUint64(id[8:], binary.BigEndian.Uint64(id[8:])^p.salt)
		return id
	}
	moved := func(t int64) int64 {
		if t == 0 {
			return 0
		}
		return t + p.delta
	}
	switch {
	case p.delta%int64(time.Second) != 0:
		return fmt.Sprintf("moved by %d ns, not whole seconds", p.delta)
	case s.TraceID != salted(was.TraceID):
		return "trace id salted unlike the rest of its pass"
	case s.StartUnixNano != moved(was.StartUnixNano) || s.EndUnixNano != moved(was.EndUnixNano):
		return fmt.Sprintf("start %d end %d, want %d %d: not the pass's one shift of %d", s.StartUnixNano, s.EndUnixNano,
			moved(was.StartUnixNano), moved(was.EndUnixNano), p.delta)
	case s.ParentID != was.ParentID || s.Name != was.Name || s.Kind != was.Kind || s.Status != was.Status ||
		s.Service() != was.Service() || len(s.Events) != len(was.Events) || len(s.Links) != len(was.Links) || len(s.Attrs) != len(was.Attrs):
		return "not the recorded span"
	}
	for i := range s.Events {
		if s.Events[i].TimeUnixNano != moved(was.Events[i].TimeUnixNano) {
			return "an event moved unlike its span"
		}
	}
	for i := range s.Links {
		if s.Links[i].TraceID != salted(was.Links[i].TraceID) || s.Links[i].SpanID != was.Links[i].SpanID {
			return fmt.Sprintf("link to %s/%s, want %s/%s", s.Links[i].TraceID, s.Links[i].SpanID, salted(was.Links[i].TraceID), was.Links[i].SpanID)
		}
	}
	for i, a := range s.Attrs {
		w := was.Attrs[i]
		if a.Key != w.Key {
			return fmt.Sprintf("attribute %s, recorded %s", a.Key, w.Key)
		}
		switch a.Key {
		case spans.AttrDeadline:
			v, _ := a.AsInt()
			if was, _ := w.AsInt(); v != was+p.delta {
				return fmt.Sprintf("%s = %s, want the recorded %s moved by %d", a.Key, a.AsString(), w.AsString(), p.delta)
			}
			continue
		case spans.AttrResHeaderRetryAfter, spans.AttrReqHeaderDeadline:
			continue // their forms are tracefile/replay's tests' business
		}
		if a.AsString() != w.AsString() {
			return fmt.Sprintf("attribute %s = %s, recorded %s = %s", a.Key, a.AsString(), w.Key, w.AsString())
		}
	}
	return ""
}

// comparableReport is what `analyze --format json` says of a file, less what a replay changes on
// purpose: trace ids (in findings and evidence) and instants (window bounds).
type comparableReport struct {
	Input        analyzer.InputStats
	Dependencies []analyzer.DependencyStats
	Findings     []string
	Notes        []string
}

func (r comparableReport) String() string {
	b, _ := json.MarshalIndent(r, "", " ")
	return string(b)
}

// instantKeys are the evidence keys that hold instants, which a replay moves.
var instantKeys = []string{"window_start", "window_end", "wave_starts", "opened_at"}

func analyzeJSON(t *testing.T, path string) comparableReport {
	t.Helper()
	code, out, stderr := runCLI(t, "", "analyze", "--format", "json", path)
	if code != 0 && code != 1 {
		t.Fatalf("analyze %s: exit %d\n%s", path, code, stderr)
	}
	var r analyzer.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("analyze %s: %v\n%s", path, err, out)
	}
	c := comparableReport{Input: r.Input, Dependencies: r.Dependencies, Notes: r.Notes}
	for _, f := range r.Findings {
		for _, k := range instantKeys {
			delete(f.Evidence, k)
		}
		if ids, ok := f.Evidence["trace_ids"].Texts(); ok {
			// The traces a cross-trace finding counted: a replay gives them new ids, not a new number.
			f.Evidence["trace_ids"] = analyzer.Int(len(ids))
		}
		ids := strings.Join(slices.Sorted(slices.Values(f.SpanIDs)), ",")
		if d, ok := suite.ByName(f.Detector); ok && d.Scope == analyzer.ScopeWindow {
			// A finding across traces names a sample of their spans, taken in trace-id order,
			// which the new ids change.
			ids = fmt.Sprintf("%d span ids", len(f.SpanIDs))
		}
		ev, _ := json.Marshal(f.Evidence)
		c.Findings = append(c.Findings, strings.Join([]string{f.Detector, f.Severity.String(), f.Service, f.Dependency,
			f.Summary, f.Action, ids, string(ev)}, " | "))
	}
	sort.Strings(c.Findings)
	slices.Sort(c.Notes)
	return c
}
