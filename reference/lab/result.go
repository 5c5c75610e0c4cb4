package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a run. The zero value runs on the fake clock with seed 1 and no telemetry.
type Options struct {
	// Realtime runs on the wall clock: the scenarios then take their real time (about 30 s for all)
	// and timings vary by a few milliseconds. Default: the fake clock, exact and instant.
	Realtime bool
	// Start is the fake clock's reading at the start of the run; zero means now (truncated to the
	// second). Fixtures pass a fixed time so recordings are stable.
	Start time.Time
	// Seed seeds every client's jitter (each client its own stream). Zero means [DefaultSeed].
	Seed uint64
	// TracerProvider returns the provider for one service of the run (the callers, each origin, each
	// layer); nil records no spans.
	TracerProvider func(service string) trace.TracerProvider
	// MeterProvider receives the reference clients' metrics; nil records none.
	MeterProvider metric.MeterProvider
	// Logger receives what the lab's servers have to say (http.Server's error log: a handler that
	// panicked, a failed accept) and the lab's own warnings. Nil discards them: the lab never
	// writes to the process's stderr or the standard log, which a dashboard may be drawing on.
	Logger *slog.Logger
	// Layers, when set, runs the layers scenario as this one variant instead of the default two.
	Layers *LayersConfig
}

// Refusals are calls or retries refused before reaching the origin.
type Refusals struct {
	Budget  int `json:"budget"`
	Breaker int `json:"breaker"`
}

// Row is one line of an experiment's table. Fields that a scenario does not measure are omitted
// from JSON.
type Row struct {
	Scenario string `json:"scenario"`
	Variant  string `json:"variant"`
	// Origin names the origin a per-origin row is about.
	Origin        string         `json:"origin,omitempty"`
	Calls         int            `json:"calls"`
	OriginSaw     int            `json:"origin_saw"`
	Amplification float64        `json:"amplification"`
	OK            int            `json:"ok"`
	Outcomes      map[string]int `json:"outcomes"`
	SlowestS      float64        `json:"slowest_s"`
	Refusals      Refusals       `json:"refusals"`

	Attempts          int      `json:"attempts,omitempty"`
	BreakerTransition *int     `json:"breaker_transitions,omitempty"`
	OriginCompleted   *int     `json:"origin_completed,omitempty"`
	OriginStopped     *int     `json:"origin_stopped,omitempty"`
	PostDeadlineS     *float64 `json:"post_deadline_s,omitempty"`
	FirstSuccessS     *float64 `json:"first_success_s,omitempty"`
	EntitiesCreated   *int     `json:"entities_created,omitempty"`
	AtS               *float64 `json:"at_s,omitempty"`
	Detail            string   `json:"detail,omitempty"`
}

// Result is a scenario's table.
type Result struct {
	Scenario string
	Title    string
	// Source names the section of docs/principles.md whose figures the scenario reproduces.
	Source string
	Rows   []Row
	// Lines are the table as WriteText prints it.
	Lines []string
}

// WriteText prints the table, one line a row, under a heading with the scenario and its source.
func (r *Result) WriteText(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "== %s: %s (%s)\n", r.Scenario, r.Title, r.Source); err != nil {
		return err
	}
	for _, l := range r.Lines {
		if _, err := fmt.Fprintln(w, "  "+l); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WriteJSON prints one JSON object per row.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	for i := range r.Rows {
		if err := enc.Encode(&r.Rows[i]); err != nil {
			return fmt.Errorf("encode %s row %d: %w", r.Scenario, i, err)
		}
	}
	return nil
}

func intp(v int) *int           { return &v }
func floatp(v float64) *float64 { return &v }
func amp(saw, calls int) float64 {
	if calls == 0 {
		return 0
	}
	return round2(float64(saw) / float64(calls))
}

// outcomesText renders {"503": 5, "refused": 5} as the tables of docs/principles.md do.
func outcomesText(m map[string]int) string {
	s := "{"
	for i, k := range sortedKeys(m) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s: %d", k, m[k])
	}
	return s + "}"
}
