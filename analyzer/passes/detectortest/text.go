package detectortest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/spans"
)

// TextExt is the suffix of a trace written in the compact text form (see the package
// documentation): one line a span, its expectations in `# want` comments on the span's line.
const TextExt = ".trace"

// DefaultStart is the instant span times count from when a .trace file has no `start` line.
var DefaultStart = time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)

// Keys a span line may hold besides attributes. None is an attribute key the decoder keeps
// (TestMetaKeysAreNoAttributes), so a line never means both.
const (
	keyID       = "id"       // a label naming the span, for parent= and link= elsewhere
	keyParent   = "parent"   // the label of the parent, for a span whose parent is not the line above
	keyLink     = "link"     // a linked span: LABEL in this trace, or TRACE:LABEL
	keyInstance = "instance" // service.instance.id
	keyMessage  = "message"  // the status message
)

var metaKeys = []string{keyID, keyParent, keyLink, keyInstance, keyMessage}

var kindWords = map[string]spans.Kind{
	"unspecified": spans.KindUnspecified, "internal": spans.KindInternal, "server": spans.KindServer,
	"client": spans.KindClient, "producer": spans.KindProducer, "consumer": spans.KindConsumer,
}

// textTrace is a .trace file read: the spans in line order, one batch a `trace` block, and the
// expectations, each about the span of its line.
type textTrace struct {
	batches []*spans.Batch
	want    []Want
	// line is the line of each span, by span id, for messages about a finding's spans.
	line map[string]int
}

// textSpan is a span line being read, before its parent and links are resolved.
type textSpan struct {
	span   spans.Span
	line   int
	indent int
	parent string // parent= label
	links  []string
}

// parseText reads a .trace file; file names it in errors, each at its line.
func parseText(file string, data []byte) (*textTrace, error) {
	out := &textTrace{line: map[string]int{}}
	var errs []error
	fail := func(n int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", file, n, fmt.Sprintf(format, args...)))
	}
	start := DefaultStart.UnixNano()
	var (
		trace     string // the current trace's name
		traceID   spans.TraceID
		batch     *spans.Batch
		stack     []*textSpan // the open ancestors of the next line, by indentation
		all       []*textSpan // the current trace's spans
		last      *textSpan   // the span of the latest span line, which a `# want` line is about
		ordinal   int
		traces    = map[string]bool{}
		resources = map[[2]string]*spans.Resource{}
	)
	finish := func() {
		if batch == nil {
			return
		}
		for _, s := range all {
			if s.parent != "" {
				s.span.ParentID = spanID(trace, s.parent)
			}
			for _, l := range s.links {
				tname, label, ok := strings.Cut(l, ":")
				if !ok {
					tname, label = trace, l
				}
				s.span.Links = append(s.span.Links, spans.Link{TraceID: traceIDOf(tname), SpanID: spanID(tname, label)})
			}
			batch.Spans = append(batch.Spans, s.span)
		}
		out.batches = append(out.batches, batch)
		batch, all, stack, last = nil, nil, nil, nil
	}
	for i, raw := range strings.Split(string(data), "\n") {
		n := i + 1
		line := strings.TrimRight(raw, " \t\r")
		body := strings.TrimLeft(line, " ")
		if strings.HasPrefix(body, "\t") {
			fail(n, "indent with spaces, not tabs")
			continue
		}
		if body == "" {
			continue
		}
		if c, ok := strings.CutPrefix(body, "#"); ok {
			if w, ok := cutWant(c); ok {
				if last == nil {
					fail(n, "a want comment must follow the span it is about")
					continue
				}
				if err := out.addWant(file, n, last, w); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		if rest, ok := strings.CutPrefix(body, "start "); ok && len(body) == len(line) {
			t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(rest))
			if err != nil {
				fail(n, "start: %v", err)
				continue
			}
			start = t.UnixNano()
			continue
		}
		if rest, ok := strings.CutPrefix(body, "trace "); ok && len(body) == len(line) {
			finish()
			trace = strings.TrimSpace(rest)
			if trace == "" || strings.ContainsAny(trace, " \t:#") {
				fail(n, "trace %q: a trace's name is one word, without ':' or '#'", trace)
			}
			if traces[trace] {
				fail(n, "trace %q is written twice: a trace is one block", trace)
			}
			traces[trace] = true
			traceID, batch, ordinal = traceIDOf(trace), &spans.Batch{}, 0
			continue
		}
		if batch == nil {
			fail(n, "a span before the first `trace NAME` line")
			continue
		}
		fields, comment, err := splitFields(body)
		if err != nil {
			fail(n, "%v", err)
			continue
		}
		ordinal++
		s, err := parseSpan(fields, start)
		if err != nil {
			fail(n, "%v", err)
			continue
		}
		s.line, s.indent = n, len(line)-len(body)
		s.span.TraceID = traceID
		label := "#" + strconv.Itoa(ordinal)
		for _, f := range fields[4:] {
			if k, v, _ := strings.Cut(f, "="); k == keyID {
				label, _ = unquote(v)
			}
		}
		s.span.SpanID = spanID(trace, label)
		for len(stack) > 0 && stack[len(stack)-1].indent >= s.indent {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 {
			if s.parent != "" {
				fail(n, "parent=%s on an indented line: its parent is the line it is indented under", s.parent)
			}
			s.span.ParentID = stack[len(stack)-1].span.SpanID
		} else if s.indent > 0 && len(all) == 0 {
			fail(n, "the first span of a trace is not indented")
		}
		for _, o := range all {
			if o.span.SpanID == s.span.SpanID {
				fail(n, "span id %s written twice (lines %d and %d)", label, o.line, n)
			}
		}
		key := [2]string{s.span.Resource.ServiceName, s.span.Resource.ServiceInstance}
		if r, ok := resources[key]; ok {
			s.span.Resource = r
		} else {
			resources[key] = s.span.Resource
		}
		stack = append(stack, s)
		all = append(all, s)
		last = s
		out.line[s.span.SpanID.String()] = n
		if w, ok := cutWant(comment); ok {
			if err := out.addWant(file, n, s, w); err != nil {
				errs = append(errs, err)
			}
		}
	}
	finish()
	if len(out.batches) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no spans (a `trace NAME` line, then one line a span)", file))
	}
	return out, errors.Join(errs...)
}

// cutWant returns the expectation of a comment that is one: "# want LINE".
func cutWant(comment string) (string, bool) {
	c := strings.TrimSpace(comment)
	if w, ok := strings.CutPrefix(c, "want "); ok {
		return w, true
	}
	return "", c == "want"
}

func (t *textTrace) addWant(file string, n int, s *textSpan, text string) error {
	w, err := parseWantLine(strings.TrimSpace(text))
	if err != nil {
		return fmt.Errorf("%s:%d: %w", file, n, err)
	}
	w.Pos, w.Span = fmt.Sprintf("%s:%d", file, n), s.span.SpanID.String()
	t.want = append(t.want, w)
	return nil
}

// parseSpan reads the fields of a span line: SERVICE KIND NAME START+DURATION, then any of ok,
// error, KEY=VALUE.
func parseSpan(f []string, start int64) (*textSpan, error) {
	const form = "a span is SERVICE KIND NAME START+DURATION [ok|error] [KEY=VALUE ...]"
	if len(f) < 4 {
		return nil, fmt.Errorf("%d fields: %s", len(f), form)
	}
	s := &textSpan{}
	svc, err := unquote(f[0])
	if err != nil {
		return nil, fmt.Errorf("service: %v", err)
	}
	if svc == "-" {
		svc = ""
	}
	s.span.Resource = &spans.Resource{ServiceName: svc}
	kind, ok := kindWords[f[1]]
	if !ok {
		return nil, fmt.Errorf("kind %q: server, client, internal, producer, consumer or unspecified", f[1])
	}
	s.span.Kind = kind
	if s.span.Name, err = unquote(f[2]); err != nil {
		return nil, fmt.Errorf("name: %v", err)
	}
	// START may begin with a sign of its own (-1ms): the '+' is looked for after its first byte.
	at, dur, ok := strings.Cut(f[3][min(1, len(f[3])):], "+")
	if !ok {
		return nil, fmt.Errorf("time %q: START+DURATION from the start line, such as 4ms+3ms", f[3])
	}
	at = f[3][:min(1, len(f[3]))] + at
	off, err1 := time.ParseDuration(at)
	d, err2 := time.ParseDuration(dur)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("time %q: %v", f[3], err)
	}
	s.span.StartUnixNano = start + int64(off)
	s.span.EndUnixNano = s.span.StartUnixNano + int64(d)
	seen := map[string]bool{}
	for _, tok := range f[4:] {
		switch tok {
		case "ok", "error":
			if s.span.Status != spans.StatusUnset {
				return nil, fmt.Errorf("%s: the status is written once", tok)
			}
			s.span.Status = map[string]spans.StatusCode{"ok": spans.StatusOK, "error": spans.StatusError}[tok]
			continue
		}
		k, v, ok := strings.Cut(tok, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q: KEY=VALUE, ok or error", tok)
		}
		if seen[k] && k != keyLink {
			return nil, fmt.Errorf("%s is written twice", k)
		}
		seen[k] = true
		switch k {
		case keyID, keyParent, keyLink, keyInstance, keyMessage:
			text, err := unquote(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", k, err)
			}
			switch k {
			case keyParent:
				s.parent = text
			case keyLink:
				s.links = append(s.links, text)
			case keyInstance:
				s.span.Resource.ServiceInstance = text
			case keyMessage:
				s.span.StatusMessage = text
			}
			continue
		}
		if !spans.IsWellKnown(k) {
			return nil, fmt.Errorf("%s: not an attribute the analyzer keeps (spans.WellKnown), so it would change nothing", k)
		}
		a, err := parseAttr(k, v)
		if err != nil {
			return nil, err
		}
		s.span.Attrs = append(s.span.Attrs, a)
	}
	return s, nil
}

// parseAttr reads an attribute's value: "quoted" is a string, true and false are booleans, a
// number is an int (a double with a '.' or an exponent), [...] or {...} an array or map kept as
// its text, and any other word a string.
func parseAttr(k, v string) (spans.Attr, error) {
	switch {
	case strings.HasPrefix(v, `"`):
		s, err := strconv.Unquote(v)
		if err != nil {
			return spans.Attr{}, fmt.Errorf("%s: %s is no Go string", k, v)
		}
		return spans.StringAttr(k, s), nil
	case strings.HasPrefix(v, "[") || strings.HasPrefix(v, "{"):
		return spans.Attr{Key: k, Str: v, Type: spans.ValueOther}, nil
	case v == "true" || v == "false":
		return spans.BoolAttr(k, v == "true"), nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return spans.IntAttr(k, n), nil
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return spans.DoubleAttr(k, f), nil
	}
	return spans.StringAttr(k, v), nil
}

// formatAttr writes an attribute's value so that parseAttr reads it back the same.
func formatAttr(a spans.Attr) (string, error) {
	switch a.Type {
	case spans.ValueString:
		if b, err := parseAttr(a.Key, a.Str); err == nil && b == a && a.Str != "" &&
			!strings.ContainsAny(a.Str, " \t\"#") {
			return a.Str, nil
		}
		return strconv.Quote(a.Str), nil
	case spans.ValueInt:
		return strconv.FormatInt(a.Num, 10), nil
	case spans.ValueDouble:
		s := strconv.FormatFloat(a.Float(), 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0"
		}
		if math.IsNaN(a.Float()) || math.IsInf(a.Float(), 0) {
			return "", fmt.Errorf("%s: %s has no text form", a.Key, s)
		}
		return s, nil
	case spans.ValueBool:
		return strconv.FormatBool(a.Num != 0), nil
	case spans.ValueOther:
		if (strings.HasPrefix(a.Str, "[") || strings.HasPrefix(a.Str, "{")) && !strings.ContainsAny(a.Str, " \t#") {
			return a.Str, nil
		}
	}
	return "", fmt.Errorf("%s: value %q of type %d has no text form", a.Key, a.Str, a.Type)
}

// word writes s bare when it reads back as itself, quoted otherwise.
func word(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"#=") || s != strings.TrimSpace(s) {
		return strconv.Quote(s)
	}
	return s
}

func unquote(s string) (string, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return "", fmt.Errorf("%s is no Go string", s)
		}
		return u, nil
	}
	return s, nil
}

// splitFields splits a span line at spaces outside quoted strings; a field starting with '#'
// starts the comment, returned apart.
func splitFields(line string) (fields []string, comment string, err error) {
	i := 0
	for i < len(line) {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i == len(line) {
			break
		}
		if line[i] == '#' {
			return fields, line[i+1:], nil
		}
		j, quoted := i, false
		for ; j < len(line) && (quoted || (line[j] != ' ' && line[j] != '\t')); j++ {
			switch {
			case quoted && line[j] == '\\':
				j++
			case line[j] == '"':
				quoted = !quoted
			}
		}
		if quoted {
			return nil, "", fmt.Errorf("a quote is not closed: %s", line[i:])
		}
		fields = append(fields, line[i:j])
		i = j
	}
	return fields, "", nil
}

// traceIDOf and spanID derive a trace's id from its name and a span's from its trace's name and
// its label (id=, else "#N" for the Nth span line of the trace), so that the same file always
// makes the same ids and a label names one span wherever it is used.
func traceIDOf(name string) spans.TraceID {
	sum := sha256.Sum256([]byte("trace " + name))
	return spans.TraceID(sum[:16])
}

func spanID(trace, label string) spans.SpanID {
	sum := sha256.Sum256([]byte("span " + trace + " " + label))
	return spans.SpanID(sum[:8])
}
