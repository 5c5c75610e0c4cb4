// Package detectortest is the test harness of the detectors, in the manner of
// golang.org/x/tools/go/analysis/analysistest: [Run] analyzes each trace in a detector's
// testdata/ with that detector alone and compares its findings with the expectations written
// in it, under the policy beside it when there is one (NAME.policy.yaml). A mismatch fails with a
// diff that names the line of each expectation and span concerned.
//
// # Traces as text
//
// A case written by hand is a NAME.trace file: one line a span, each expectation a `# want`
// comment on the line of a span the finding is about.
//
//	# web retries catalog three times, with no pause.
//	trace checkout
//	web server "GET /checkout" 0s+20ms http.route=/checkout
//	  web client "HTTP GET" 1ms+3ms error url.full=http://catalog:8080/items http.response.status_code=503
//	    catalog server "GET /items" 1.5ms+2ms error http.response.status_code=503
//	  web client "HTTP GET" 4ms+3ms error url.full=http://catalog:8080/items http.response.status_code=503 # want warning web -> catalog retries=1
//	    catalog server "GET /items" 4.5ms+2ms error http.response.status_code=503
//
// The lines are:
//
//   - `trace NAME` starts a trace (one word, no ':'); its id is derived from NAME, and the spans
//     that follow, to the next `trace` line, are its spans, fed to the analyzer as one batch.
//   - A span: SERVICE KIND NAME START+DURATION, then, in any order, `ok` or `error` (the status;
//     unset without either) and KEY=VALUE pairs. SERVICE is service.name (`-` for none); KIND is
//     server, client, internal, producer, consumer or unspecified; START and DURATION are Go
//     durations (4ms, 1.5ms, 2s), START counted from the `start` line. A span's parent is the
//     line above it with less indentation (two spaces a level); a line without indentation is a
//     root.
//   - `start TIME` (RFC 3339) sets the instant START counts from, for the lines after it; without
//     one it is [DefaultStart], 2026-01-15T10:00:00Z.
//   - `#` starts a comment, at the start of a line or after a span's fields. `# want LINE` is an
//     expectation about the span of its line, or, alone on its line, about the span line above.
//
// KEY=VALUE is an attribute, or one of these:
//
//   - id=LABEL names the span, for parent= and link= elsewhere (its id is derived from the trace
//     and the label; an unlabelled span's from its position in the trace).
//   - parent=LABEL, on a line without indentation, makes the span LABEL its parent - a span of
//     the trace written elsewhere, or one no line holds (a parent that was never exported).
//   - link=LABEL links to a span of this trace, link=TRACE:LABEL to one of another; repeat it for
//     several links.
//   - instance=ID is service.instance.id; message="TEXT" the status message.
//
// An attribute's key must be one the span decoder keeps (spans.WellKnown): any other would be
// dropped from real traffic, so the line would test what never happens. Its VALUE is a Go
// string when quoted ("503" is a string), true or false a bool, a number an int (a double with a
// '.' or an exponent: 1.5, 2.0), [...] or {...} an array or map kept as its text, and any other
// word a string. Quote a string with a space, '"' or '#' in it, a service or span name with a
// space or '=', and a service named trace or start on a line without indentation.
//
// A `# want` line reads SEVERITY SERVICE -> DEPENDENCY [KEY=VALUE ...], as a line of a .want
// file (see [Run]), and matches a finding that says so and whose span ids include the span of its
// line. Each finding must match a want, and each want a finding: a finding nobody expected fails
// with the lines of its spans, a want nothing matched with its own line (and, when the finding
// is there but about other spans, theirs). The text holds what the analyzer reads of a span and
// nothing else: no events, no resource attributes besides the two above, no instrumentation
// scope.
//
// # Recorded traces
//
// A trace recorded from a real library stays as it was recorded: NAME.jsonl (OTLP/JSON lines, as
// the OpenTelemetry Collector's file exporter writes them), its expectations in NAME.want beside
// it, one line per finding, which [Run] does not tie to spans. [Convert] (`go test
// ./analyzer/passes/NAME -detectortest.convert='GLOB'`) rewrites such a case as a .trace once the
// detector reports the same findings on both; use it for a case made by a generator, never for
// a recording.
//
// It also reads the recorded fixtures (fixtures/) through the whole suite, as `stormwatch
// analyze` does, for tests about how detectors and policies work together ([Analyze], [Load]).
package detectortest
