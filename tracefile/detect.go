package tracefile

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrNotTraceFile marks content that is none of the formats the reader reads: a file given by
// mistake, which must fail loudly rather than read as a recording with no traces.
var ErrNotTraceFile = errors.New("not a trace file")

// FormatsRead names the formats the reader reads, for messages that must tell a user what to give.
const FormatsRead = "OTLP/JSON lines (.jsonl, as the OpenTelemetry Collector file exporter and 'stormwatch collect --record' write them), " +
	"one OTLP/JSON request (.json), length-prefixed OTLP/protobuf (.pb), Jaeger JSON ({\"data\":[...]} as the Jaeger UI and API give it) " +
	"or Zipkin v2 JSON (an array of spans), optionally gzipped"

// headSize is how much of a file detection looks at.
const headSize = 4096

// detect decides a file's format from ext (its extension's, FormatUnknown when it has none we
// know) and head (its first bytes, decompressed). It is the one place that knows what each
// format looks like at the start of a file, so a new reader only adds its case here.
//
// Content wins over an extension that contradicts it, except that a JSON extension is trusted
// when the content is not obviously something else: a recording whose first line was damaged
// must still be read, its bad records skipped and reported.
func detect(head []byte, ext Format, maxRecord int) (Format, error) {
	body := bytes.TrimLeft(head, " \t\r\n")
	switch {
	case len(body) == 0 && len(head) < headSize:
		// Empty, or blank: no records either way. The caller decides whether no spans is fine.
		if ext == FormatUnknown {
			return FormatJSONLines, nil
		}
		return ext, nil
	case body[0] == '{':
		if firstKeyIs(body, "data") || firstKeyIs(body, "traceID") {
			// Jaeger's query API and UI ({"data":[...]}), or one Jaeger trace saved alone: no
			// OTLP document has either member.
			return FormatJaegerJSON, nil
		}
		if ext == FormatJSONLines || ext == FormatJSON {
			return ext, nil
		}
		return FormatJSON, nil
	case body[0] == '[':
		// OTLP has no top-level array; Zipkin's v2 JSON is one of span objects.
		if rest := bytes.TrimLeft(body[1:], " \t\r\n"); len(rest) == 0 || rest[0] == '{' || rest[0] == ']' {
			return FormatZipkinJSON, nil
		}
		return 0, notTraceFile("a JSON array of something other than spans")
	case ext == FormatJSONLines || ext == FormatJSON:
		return ext, nil
	case looksLikeProto(head, maxRecord) || ext == FormatProto && len(head) < 5:
		return FormatProto, nil
	}
	return 0, notTraceFile(describe(head))
}

// firstKeyIs reports whether the JSON object at the start of body has key as its first member,
// or after members whose values are scalars (Jaeger writes "data" first, but a tool that
// re-serialised the document may have sorted "errors" and "limit" before it).
func firstKeyIs(body []byte, key string) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if tok == key {
			return true
		}
		if tok == "resourceSpans" || tok == "resource_spans" {
			return false
		}
		v, err := dec.Token()
		if err != nil {
			return false
		}
		if _, nested := v.(json.Delim); nested {
			// null counts as a scalar; an array or object before "data" is not Jaeger's layout.
			return false
		}
	}
	return false
}

// looksLikeProto: a 4-byte big-endian length within the record bound, then an
// ExportTraceServiceRequest, whose only field is resourceSpans (field 1, length-delimited: 0x0a).
func looksLikeProto(head []byte, maxRecord int) bool {
	if len(head) < 4 {
		return false
	}
	n := binary.BigEndian.Uint32(head)
	if uint64(n) > uint64(maxRecord) {
		return false
	}
	return n == 0 || len(head) == 4 || head[4] == 0x0a
}

func notTraceFile(found string) error {
	return fmt.Errorf("%w: it holds %s; stormwatch reads %s", ErrNotTraceFile, found, FormatsRead)
}

// describe says what head looks like, for a user who gave the wrong file.
func describe(head []byte) string {
	if utf8.Valid(head) || len(head) == headSize && utf8.Valid(head[:len(head)-utf8.UTFMax]) {
		line, _, _ := strings.Cut(strings.TrimSpace(string(head)), "\n")
		printable := true
		for _, r := range line {
			if !unicode.IsPrint(r) && r != '\t' {
				printable = false
				break
			}
		}
		if printable {
			if len(line) > 60 {
				line = line[:60] + "..."
			}
			return fmt.Sprintf("text beginning %q", line)
		}
	}
	n := min(len(head), 8)
	return fmt.Sprintf("binary data beginning % x", head[:n])
}

// checkShape is asked about a JSON record that decoded to no span at all: is it an OTLP request
// with nothing in it ({} or empty resourceSpans), or a JSON document of another kind, whose
// unknown fields the decoder ignored? It returns nil for the first, and what was found for the
// second.
func checkShape(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil // not an object: the decoder has said so already
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		k, _ := tok.(string)
		if k == "resourceSpans" || k == "resource_spans" {
			return nil
		}
		if len(keys) < 5 {
			keys = append(keys, fmt.Sprintf("%q", k))
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	if len(keys) == 0 {
		return nil // {}: an empty request
	}
	return notTraceFile(fmt.Sprintf("a JSON object with the keys %s and no resourceSpans", strings.Join(keys, ", ")))
}
