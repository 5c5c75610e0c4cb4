package main

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/stormwatch/stormwatch/tracefile"
)

// TestCollectHelperProcess is not a test: TestRecordingSurvivesKill9 runs the test binary again
// with STORMWATCH_COLLECT_ARGS set, so that `collect` runs in a process of its own that can be
// killed with SIGKILL.
func TestCollectHelperProcess(t *testing.T) {
	args := os.Getenv("STORMWATCH_COLLECT_ARGS")
	if args == "" {
		t.Skip("helper process for TestRecordingSurvivesKill9")
	}
	err := run(context.Background(), strings.Split(args, "\x1f"), strings.NewReader(""), os.Stdout, os.Stderr)
	os.Exit(exitCode(err, os.Stderr))
}

// killableCollect is `collect` in a child process.
type killableCollect struct {
	cmd    *exec.Cmd
	stderr *collectStderr
	http   string
}

func startKillableCollect(t *testing.T, args ...string) *killableCollect {
	t.Helper()
	args = append([]string{"collect", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--status-interval", "0"}, args...)
	k := &killableCollect{stderr: &collectStderr{}}
	k.cmd = exec.Command(os.Args[0], "-test.run=^TestCollectHelperProcess$")
	k.cmd.Env = append(os.Environ(), "STORMWATCH_COLLECT_ARGS="+strings.Join(args, "\x1f"))
	k.cmd.Stderr = k.stderr
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.cmd.Process.Kill(); _ = k.cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if h := httpListening.FindStringSubmatch(k.stderr.String()); h != nil {
			k.http = h[1]
			return k
		}
		if time.Now().After(deadline) {
			t.Fatalf("collect never said where it listens:\n%s", k.stderr.String())
		}
	}
}

// exportRequest is an OTLP/protobuf request of n spans with ids of their own (round, sequence).
func exportRequest(round, seq, n int) ([]byte, [][8]byte) {
	ss := &tracepb.ScopeSpans{}
	var ids [][8]byte
	for i := range n {
		var sid [8]byte
		binary.BigEndian.PutUint64(sid[:], uint64(round)<<40|uint64(seq)<<16|uint64(i)|1<<63)
		tid := make([]byte, 16)
		copy(tid, sid[:])
		ss.Spans = append(ss.Spans, &tracepb.Span{TraceId: tid, SpanId: sid[:], Name: "GET /crash", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: uint64(time.Now().UnixNano()), EndTimeUnixNano: uint64(time.Now().UnixNano()) + 1000})
		ids = append(ids, sid)
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{},
		ScopeSpans: []*tracepb.ScopeSpans{ss},
	}}}
	body, _ := proto.Marshal(req)
	return body, ids
}

// readSpanIDs reads a recording leniently (as analyze does) and returns its span ids, the reader's
// warnings and whether reading it failed.
func readSpanIDs(t *testing.T, path string) (map[[8]byte]bool, []error, error) {
	t.Helper()
	ids := map[[8]byte]bool{}
	r, err := tracefile.Open(path, tracefile.ReadOptions{})
	if errors.Is(err, os.ErrNotExist) {
		return ids, nil, nil
	}
	if err != nil {
		return ids, nil, err
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return ids, r.Warnings(), nil
		}
		if err != nil {
			return ids, r.Warnings(), err
		}
		for _, s := range rec.Batch.Spans {
			ids[s.SpanID] = true
		}
	}
}

// A collector recording under load, killed with SIGKILL and started again with the same
// --record, round after round, in every format, with --record-sync and without: with it, every
// span it acknowledged is readable afterwards; without, every span that was readable after a
// crash still is after the restarts. Each restart cuts a torn tail back to its last whole record
// (and says so), so the file stays whole for every reader: a gzip recording reads as one gzip
// stream with at most the last member unfinished, where appending after the torn member made the
// standard library's reader fail with "flate: corrupt input" and analyze refuse the whole file.
func TestRecordingSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills collectors")
	}
	for _, name := range []string{"r.jsonl", "r.jsonl.gz", "r.pb", "r.pb.gz"} {
		for _, recordSync := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/sync=%v", name, recordSync), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), name)
				args := []string{"--record", path}
				if recordSync {
					args = append(args, "--record-sync")
				}
				acked := map[[8]byte]bool{}
				readable := map[[8]byte]bool{}
				cutSaid := 0
				const rounds = 3
				for round := range rounds {
					k := startKillableCollect(t, args...)
					if round > 0 && strings.Contains(k.stderr.String(), "cut back to its last whole record") {
						cutSaid++
					}
					// Send until killed: 4 senders, requests of 20 spans.
					var mu sync.Mutex
					var wg sync.WaitGroup
					stop := make(chan struct{})
					for s := range 4 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for seq := s; ; seq += 4 {
								select {
								case <-stop:
									return
								default:
								}
								body, ids := exportRequest(round, seq, 20)
								resp, err := http.Post("http://"+k.http+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
								if err != nil {
									return // killed
								}
								io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
								if resp.StatusCode == http.StatusOK {
									mu.Lock()
									for _, id := range ids {
										acked[id] = true
									}
									mu.Unlock()
								}
							}
						}()
					}
					// Without --record-sync the recorder writes once a second: each round
					// outlasts a write, so there is something to lose.
					if recordSync {
						time.Sleep(300 * time.Millisecond)
					} else {
						time.Sleep(1500 * time.Millisecond)
					}
					if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					_ = k.cmd.Wait()
					close(stop)
					wg.Wait()
					ids, warnings, err := readSpanIDs(t, path)
					if err != nil {
						t.Fatalf("round %d: the recording does not read after the crash: %v", round, err)
					}
					for _, w := range warnings {
						if strings.Contains(w.Error(), "is torn") {
							t.Errorf("round %d: a torn gzip member in the middle of the recording: %v", round, w)
						}
					}
					for id := range readable {
						if !ids[id] {
							t.Fatalf("round %d: span %x, readable after an earlier crash, is lost", round, id)
						}
					}
					readable = ids
				}
				if recordSync {
					missing := 0
					for id := range acked {
						if !readable[id] {
							missing++
						}
					}
					if missing > 0 {
						t.Errorf("%d of %d acknowledged spans are not in the recording", missing, len(acked))
					}
				}
				if len(readable) == 0 {
					t.Fatal("nothing was recorded")
				}
				if strings.HasSuffix(name, ".gz") {
					// One gzip stream to the standard library's reader, unfinished at most at
					// its end (the last crash).
					f, err := os.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					zr, err := gzip.NewReader(f)
					if err != nil {
						t.Fatal(err)
					}
					_, err = io.Copy(io.Discard, zr)
					var ce flate.CorruptInputError
					if errors.As(err, &ce) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) {
						t.Errorf("the recording is not one gzip stream: %v", err)
					}
				}
				t.Logf("%d spans acknowledged, %d readable; %d restarts said they cut a torn tail", len(acked), len(readable), cutSaid)
			})
		}
	}
}

// analyze reads a gzip recording with a torn member in the middle (a recorder killed, then
// appended to by a version that did not cut the tail back): every whole record is analyzed and the
// report's notes say where the tear is. It refused the whole file ("flate: corrupt input").
func TestAnalyzeNotesATornGzipMember(t *testing.T) {
	member := func(round int, torn bool) []byte {
		var buf bytes.Buffer
		w := tracefile.NewGzipWriter(&buf, tracefile.FormatJSONLines)
		body, _ := exportRequest(round, 0, 5)
		if err := w.WriteRequest(body, false); err != nil {
			t.Fatal(err)
		}
		if !torn {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
		w.Flush()
		whole := buf.Len()
		body, _ = exportRequest(round, 1, 5)
		w.WriteRequest(body, false)
		w.Flush()
		return buf.Bytes()[:whole+(buf.Len()-whole)/2]
	}
	var file []byte
	file = append(file, member(1, false)...)
	tornAt := len(file)
	file = append(file, member(2, true)...)
	file = append(file, member(3, false)...)
	path := filepath.Join(t.TempDir(), "r.jsonl.gz")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"analyze", "--format", "json", path}, strings.NewReader(""), &out, &errb)
	if code := exitCode(err, &errb); code > 1 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		Input struct{ Spans int } `json:"input"`
		Notes []string            `json:"notes"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Input.Spans != 15 {
		t.Errorf("%d spans analyzed, want the 15 of the 3 whole records", rep.Input.Spans)
	}
	found := false
	for _, n := range rep.Notes {
		found = found || strings.Contains(n, fmt.Sprintf("the gzip member at byte %d is torn", tornAt))
	}
	if !found {
		t.Errorf("no note names the torn member at byte %d: %q", tornAt, rep.Notes)
	}
}
