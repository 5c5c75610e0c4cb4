package tracefile

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Format is the layout of a trace file's records.
type Format uint8

// The layouts. FormatUnknown asks the reader to look at the content.
const (
	FormatUnknown Format = iota
	// FormatJSONLines is one OTLP/JSON request per line (".jsonl"), the file exporter's default.
	FormatJSONLines
	// FormatJSON is one OTLP/JSON request (".json"); a writer merges everything written into it.
	FormatJSON
	// FormatProto is the file exporter's length-prefixed protobuf (".pb"): a 4-byte big-endian
	// length, then that many bytes of ExportTraceServiceRequest, repeated.
	FormatProto
	// FormatJaegerJSON is the Jaeger query service's JSON, {"data":[{"traceID","spans","processes"}]},
	// as GET /api/traces returns it and the Jaeger UI downloads it. Read only, detected by content.
	FormatJaegerJSON
	// FormatZipkinJSON is Zipkin's v2 JSON, an array of spans, as POST /api/v2/spans takes it and
	// the Zipkin UI downloads it. Read only, detected by content.
	FormatZipkinJSON
)

func (f Format) String() string {
	switch f {
	case FormatJSONLines:
		return "OTLP/JSON lines"
	case FormatJSON:
		return "OTLP/JSON"
	case FormatProto:
		return "length-prefixed OTLP/protobuf"
	case FormatJaegerJSON:
		return "Jaeger JSON"
	case FormatZipkinJSON:
		return "Zipkin v2 JSON"
	}
	return "unknown"
}

// FormatFromPath says what a file name's extension means: the format, and whether it is gzipped
// (".jsonl.gz"). An unrecognised extension gives FormatUnknown.
func FormatFromPath(path string) (Format, bool) {
	name := strings.ToLower(filepath.Base(path))
	gz := false
	if strings.HasSuffix(name, ".gz") {
		gz = true
		name = strings.TrimSuffix(name, ".gz")
	}
	switch filepath.Ext(name) {
	case ".jsonl", ".ndjson":
		return FormatJSONLines, gz
	case ".json":
		return FormatJSON, gz
	case ".pb", ".binpb":
		return FormatProto, gz
	}
	return FormatUnknown, gz
}

// writeFormat is FormatFromPath for writers, which cannot guess.
func writeFormat(path string) (Format, bool, error) {
	f, gz := FormatFromPath(path)
	if f == FormatUnknown {
		return 0, false, fmt.Errorf("trace file %s: unknown extension: use .jsonl (OTLP/JSON lines), .json (one OTLP/JSON request) or .pb (length-prefixed protobuf), optionally followed by .gz", path)
	}
	return f, gz, nil
}
