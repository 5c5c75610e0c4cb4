package detectortest

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/spans"
)

var convert = flag.String("detectortest.convert", "", "rewrite the OTLP cases (NAME.jsonl + NAME.want) whose names match this glob as NAME.trace, "+
	"once the detector reports exactly the same on both")

// Convert rewrites each OTLP case of dir whose name matches pattern (a filepath.Match glob) as a
// .trace file, the expectations of its .want placed on the first span of the finding each is
// about and its comments on top, then removes the .jsonl and .want. It first runs d over both, as
// Run does, and converts a case only when the case passes and d's findings on the two are the
// same in every field (span and trace ids read through the rewrite); otherwise it leaves the case
// as it was and says why. `go test ./analyzer/passes/NAME -detectortest.convert='*'` runs it from Run.
//
// A trace recorded from a real library stays OTLP: convert hand-made cases only.
func Convert(d *analyzer.Detector, dir, pattern string) (converted []string, err error) {
	cases, err := Cases(dir)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, c := range cases {
		if ok, err := filepath.Match(pattern, c.Name); err != nil || !ok || c.text != nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		if err := convertCase(d, dir, c); err != nil {
			errs = append(errs, fmt.Errorf("%s: not converted: %w", c.Trace, err))
			continue
		}
		converted = append(converted, c.Name)
	}
	return converted, errors.Join(errs...)
}

func convertCase(d *analyzer.Detector, dir string, c Case) error {
	old, err := c.Analyze(d)
	if err != nil {
		return err
	}
	if diff := Diff(c.Want, old); diff != "" {
		return fmt.Errorf("the case fails as it is; fix it first:\n%s", diff)
	}
	// Each expectation goes to the first span of the finding it matches.
	wants := map[string][]string{}
	used := make([]bool, len(old))
	for _, w := range c.Want {
		for j, f := range old {
			if !used[j] && as(f, keysOf(w)).String() == w.String() {
				if len(f.SpanIDs) == 0 {
					return fmt.Errorf("%s names no span to write its want beside", w)
				}
				used[j] = true
				wants[f.SpanIDs[0]] = append(wants[f.SpanIDs[0]], w.String())
				break
			}
		}
	}
	wantFile := filepath.Join(dir, c.Name+WantExt)
	data, err := os.ReadFile(wantFile)
	if err != nil {
		return err
	}
	var header []string
	for _, line := range strings.Split(string(data), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "#") {
			header = append(header, l)
		}
	}
	batches, err := c.batches()
	if err != nil {
		return err
	}
	text, ids, err := formatText(batches, wants, header)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, c.Name+TextExt)
	parsed, err := parseText(path, text)
	if err != nil {
		return fmt.Errorf("the text written does not read back: %w", err)
	}
	if err := os.WriteFile(path, text, 0o644); err != nil {
		return err
	}
	nc := Case{Name: c.Name, Trace: path, Policy: c.Policy, Want: parsed.want, text: parsed}
	got, err := nc.Analyze(d)
	if err == nil {
		if diff := nc.diff(got); diff != "" {
			err = fmt.Errorf("the .trace fails:\n%s", diff)
		} else if a, b := findingsJSON(old, ids), findingsJSON(got, nil); a != b {
			err = fmt.Errorf("the findings differ:\nOTLP  %s\n.trace %s", a, b)
		}
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	return errors.Join(os.Remove(c.Trace), os.Remove(wantFile))
}

// findingsJSON writes findings in full, every old trace and span id in them (the evidence's
// included) replaced by its new one from ids. What follows from the ids' values alone is left
// out: the findings are in sorted order, and so is each list of span ids.
func findingsJSON(fs []analyzer.Finding, ids map[string]string) string {
	pairs := make([]string, 0, 2*len(ids))
	for old, id := range ids {
		pairs = append(pairs, old, id)
	}
	r := strings.NewReplacer(pairs...)
	var out []string
	for _, f := range fs {
		b, err := json.Marshal(f)
		if err != nil {
			return err.Error()
		}
		var v any
		if err := json.Unmarshal([]byte(r.Replace(string(b))), &v); err != nil {
			return err.Error()
		}
		b, _ = json.MarshalIndent(sortIDs(v), "", " ")
		out = append(out, string(b))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// sortIDs sorts every list of span ids in v.
func sortIDs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = sortIDs(x)
		}
	case []any:
		ids := true
		for i, x := range v {
			v[i] = sortIDs(x)
			s, ok := x.(string)
			ids = ids && ok && len(s) == 16
		}
		if ids {
			slices.SortFunc(v, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
		}
	}
	return v
}

// formatText writes batches as a .trace file: traces in order of first appearance, named t1, t2,
// ...; each span under its parent, children by start time, two spaces a level; wants (by "TRACE
// ID/SPAN ID") as comments on their span's line, header on top. It returns the new id of each
// old trace id ("TRACE") and span id ("TRACE/SPAN"), and fails on what the text form cannot
// hold (events, resource attributes, link attributes).
func formatText(batches []*spans.Batch, wants map[string][]string, header []string) ([]byte, map[string]string, error) {
	type trace struct {
		id    spans.TraceID
		name  string
		spans []*spans.Span
	}
	var traces []*trace
	byID := map[spans.TraceID]*trace{}
	first := int64(0)
	for _, b := range batches {
		for i := range b.Spans {
			s := &b.Spans[i]
			t := byID[s.TraceID]
			if t == nil {
				t = &trace{id: s.TraceID, name: "t" + strconv.Itoa(len(traces)+1)}
				byID[s.TraceID] = t
				traces = append(traces, t)
			}
			t.spans = append(t.spans, s)
			if first == 0 || s.StartUnixNano < first {
				first = s.StartUnixNano
			}
		}
	}
	start := DefaultStart.UnixNano()
	var out strings.Builder
	for _, h := range header {
		out.WriteString(h + "\n")
	}
	if len(header) > 0 {
		out.WriteString("\n")
	}
	if first < start || first > start+int64(24*time.Hour) {
		start = time.Unix(0, first).UTC().Truncate(time.Second).UnixNano()
		fmt.Fprintf(&out, "start %s\n\n", time.Unix(0, start).UTC().Format(time.RFC3339Nano))
	}
	// Labels: the spans links point at, and the parents no line holds.
	labels := map[spans.TraceID]map[spans.SpanID]string{}
	label := func(t spans.TraceID, s spans.SpanID) string {
		if labels[t] == nil {
			labels[t] = map[spans.SpanID]string{}
		}
		l, ok := labels[t][s]
		if !ok {
			l = "s" + strconv.Itoa(len(labels[t])+1)
			labels[t][s] = l
		}
		return l
	}
	traceName := func(id spans.TraceID) string {
		if t := byID[id]; t != nil {
			return t.name
		}
		t := &trace{id: id, name: "t" + strconv.Itoa(len(byID)+1)}
		byID[id] = t
		return t.name
	}
	for _, t := range traces {
		in := map[spans.SpanID]bool{}
		for _, s := range t.spans {
			in[s.SpanID] = true
		}
		for _, s := range t.spans {
			if !s.ParentID.IsZero() && !in[s.ParentID] {
				label(t.id, s.ParentID)
			}
			for _, l := range s.Links {
				label(l.TraceID, l.SpanID)
			}
		}
	}
	ids := map[string]string{}
	for ti, t := range traces {
		if ti > 0 {
			out.WriteString("\n")
		}
		fmt.Fprintf(&out, "trace %s\n", t.name)
		ids[t.id.String()] = traceIDOf(t.name).String()
		in := map[spans.SpanID]bool{}
		for _, s := range t.spans {
			in[s.SpanID] = true
		}
		children := map[spans.SpanID][]*spans.Span{}
		var roots []*spans.Span
		for _, s := range t.spans {
			if in[s.ParentID] {
				children[s.ParentID] = append(children[s.ParentID], s)
			} else {
				roots = append(roots, s)
			}
		}
		byStart := func(ss []*spans.Span) {
			slices.SortStableFunc(ss, func(a, b *spans.Span) int { return int(min(max(a.StartUnixNano-b.StartUnixNano, -1), 1)) })
		}
		byStart(roots)
		ordinal := 0
		var errs []error
		var write func(s *spans.Span, depth int)
		write = func(s *spans.Span, depth int) {
			ordinal++
			lbl, labeled := labels[t.id][s.SpanID]
			if !labeled {
				lbl = "#" + strconv.Itoa(ordinal)
			}
			ids[s.SpanID.String()] = spanID(t.name, lbl).String()
			line, err := spanLine(s, start, depth == 0 && !s.ParentID.IsZero(), labels[t.id], lbl, labeled, func(l spans.Link) string {
				if l.TraceID == t.id {
					return label(l.TraceID, l.SpanID)
				}
				return traceName(l.TraceID) + ":" + label(l.TraceID, l.SpanID)
			})
			if err != nil {
				errs = append(errs, err)
			}
			w := wants[s.SpanID.String()]
			out.WriteString(strings.Repeat("  ", depth) + line)
			for i, text := range w {
				if i == 0 {
					out.WriteString(" # want " + text + "\n")
				} else {
					out.WriteString(strings.Repeat("  ", depth) + "# want " + text + "\n")
				}
			}
			if len(w) == 0 {
				out.WriteString("\n")
			}
			kids := children[s.SpanID]
			byStart(kids)
			for _, k := range kids {
				write(k, depth+1)
			}
		}
		for _, r := range roots {
			write(r, 0)
		}
		if err := errors.Join(errs...); err != nil {
			return nil, nil, err
		}
	}
	return []byte(out.String()), ids, nil
}

// spanLine writes one span's fields (without indentation or comment).
func spanLine(s *spans.Span, start int64, orphan bool, labels map[spans.SpanID]string, lbl string, labeled bool, link func(spans.Link) string) (string, error) {
	if len(s.Events) > 0 {
		return "", fmt.Errorf("span %s has events, which the text form does not hold", s.SpanID)
	}
	svc, inst := "", ""
	if s.Resource != nil {
		if len(s.Resource.Attrs) > 0 {
			return "", fmt.Errorf("span %s has resource attributes, which the text form does not hold", s.SpanID)
		}
		svc, inst = s.Resource.ServiceName, s.Resource.ServiceInstance
	}
	f := []string{"-"}
	if svc != "" {
		f[0] = word(svc)
		if svc == "trace" || svc == "start" || svc == "-" {
			f[0] = strconv.Quote(svc)
		}
	}
	kind := ""
	for k, v := range kindWords {
		if v == s.Kind {
			kind = k
		}
	}
	if kind == "" {
		return "", fmt.Errorf("span %s: kind %d has no word", s.SpanID, s.Kind)
	}
	f = append(f, kind, word(s.Name), time.Duration(s.StartUnixNano-start).String()+"+"+time.Duration(s.EndUnixNano-s.StartUnixNano).String())
	switch s.Status {
	case spans.StatusOK:
		f = append(f, "ok")
	case spans.StatusError:
		f = append(f, "error")
	}
	if labeled {
		f = append(f, keyID+"="+word(lbl))
	}
	if orphan {
		f = append(f, keyParent+"="+word(labels[s.ParentID]))
	}
	if inst != "" {
		f = append(f, keyInstance+"="+word(inst))
	}
	for _, a := range s.Attrs {
		v, err := formatAttr(a)
		if err != nil {
			return "", fmt.Errorf("span %s: %w", s.SpanID, err)
		}
		f = append(f, a.Key+"="+v)
	}
	for _, l := range s.Links {
		if len(l.Attrs) > 0 {
			return "", fmt.Errorf("span %s has a link with attributes, which the text form does not hold", s.SpanID)
		}
		f = append(f, keyLink+"="+word(link(l)))
	}
	if s.StatusMessage != "" {
		f = append(f, keyMessage+"="+strconv.Quote(s.StatusMessage))
	}
	return strings.Join(f, " "), nil
}
