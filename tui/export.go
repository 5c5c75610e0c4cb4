package tui

import (
	"fmt"
	"os"
	"path/filepath"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/spans"
	"github.com/stormwatch/stormwatch/tracefile"
)

// export writes the trace in view (the open one, or the one of the selected operation or finding)
// to an OTLP/JSON file in a tea.Cmd: `stormwatch analyze` and `stormwatch replay` read it back, and
// so does any OpenTelemetry tool that reads the file exporter's format.
func (m Model) export() tea.Cmd {
	var id spans.TraceID
	switch m.screen {
	case screenTrace, screenSpan:
		if m.trace.view == nil {
			return status("no trace open to export")
		}
		id = m.trace.view.TraceID
	case screenOps:
		op := m.ops.selected()
		if op == nil {
			return status("no operation selected")
		}
		id = op.TraceID
	case screenFindings:
		f := m.findings.example()
		if f == nil {
			return status("no finding selected")
		}
		var err error
		if id, err = parseTraceID(f.TraceID); err != nil {
			return status("this finding names no single trace")
		}
	default:
		return status("select an operation, a finding or a trace to export")
	}
	var view *engine.TraceView
	if m.trace.view != nil && m.trace.view.TraceID == id {
		view = m.trace.view
	}
	snap, dir := m.snap, m.opt.ExportDir
	return func() tea.Msg {
		if view == nil {
			v, ok := snap.Trace(id)
			if !ok {
				return exportedMsg{err: fmt.Errorf("trace %s is no longer held", id)}
			}
			view = v
		}
		path := filepath.Join(dir, "stormwatch-trace-"+id.String()+".json")
		n, err := writeTraceFile(path, view.Spans)
		return exportedMsg{path: path, spans: n, err: err}
	}
}

// writeTraceFile writes spans as one OTLP/JSON export request.
func writeTraceFile(path string, ss []spans.Span) (int, error) {
	body, err := tracefile.ProtoToJSON(spans.AppendProto(nil, &spans.Batch{Spans: ss}))
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(body, '\n'), 0o644); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return len(ss), nil
}
