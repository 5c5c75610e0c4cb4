package tracefile

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/stormwatch/stormwatch/tracefile/otlpsdk"
)

// NewSpanExporter returns an OpenTelemetry SDK exporter that writes each exported batch as one
// request to w - what the otlptrace exporters would have sent, recorded instead. The lab and the
// fixture generators use it to record real SDK spans. Shutdown flushes w; the caller closes it.
func NewSpanExporter(w *Writer) sdktrace.SpanExporter {
	return &spanExporter{w: w}
}

type spanExporter struct{ w *Writer }

func (e *spanExporter) ExportSpans(_ context.Context, ss []sdktrace.ReadOnlySpan) error {
	if len(ss) == 0 {
		return nil
	}
	if err := e.w.WriteProto(otlpsdk.Request(ss)); err != nil {
		return fmt.Errorf("export spans to trace file: %w", err)
	}
	return nil
}

func (e *spanExporter) Shutdown(context.Context) error {
	if err := e.w.Flush(); err != nil && err != ErrClosed {
		return fmt.Errorf("shut down trace file exporter: %w", err)
	}
	return nil
}
