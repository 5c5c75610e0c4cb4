package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/stormwatch/stormwatch/analyzer"
)

// Error is one problem in a policy file, at the position of the offending key or value.
type Error struct {
	Pos Pos
	// Path names the value, e.g. classes[1].backoff.cap.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Pos, e.Path, e.Msg)
}

// Errors is every problem found in one file, in file order. Load returns it as its error.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Load reads and validates the policy file at file for the given detectors (see Parse).
func Load(file string, detectors []*analyzer.Detector) (*Policy, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	return Parse(file, data, detectors)
}

// Parse validates a policy held in memory; file is used only in positions and messages.
//
// detectors are the ones the policy may configure (suite.Default()): their names are the keys
// of the detectors section, and each takes enabled, severity and the fields its Settings declare
// (analyzer.Detector.Settings), decoded by their tags. This package keeps no list of its own, so
// a new detector's settings are configurable as soon as it declares them.
func Parse(file string, data []byte, detectors []*analyzer.Detector) (*Policy, error) {
	d := &decoder{file: file, detectors: detectors}
	p := Default()
	p.File = file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return p, nil // an empty file is the defaults
		}
		return nil, Errors{d.syntaxError(err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		at := &extra
		if len(extra.Content) > 0 {
			at = extra.Content[0]
		}
		return nil, Errors{{Pos: d.pos(at), Msg: "a policy file holds one YAML document; found another here"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, Errors{d.syntaxError(err)}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	d.top(resolve(root), p)
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			a, b := d.errs[i].Pos, d.errs[j].Pos
			return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
		})
		return nil, d.errs
	}
	for i := range p.Classes {
		p.Classes[i].Rules.merge(p.Defaults.Rules)
	}
	return p, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError turns the YAML library's message into file:line form.
func (d *decoder) syntaxError(err error) *Error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{Pos: Pos{File: d.file, Line: line, Col: 1}, Msg: "not valid YAML: " + m[2]}
	}
	return &Error{Pos: Pos{File: d.file, Line: 1, Col: 1}, Msg: "not valid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

type decoder struct {
	file      string
	detectors []*analyzer.Detector
	errs      Errors
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Pos: d.pos(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// resolve follows aliases so that anchors work like their targets.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// describe names what a node holds, for "want X, got Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return strconv.Quote(n.Value)
	}
	return "something else"
}

// fields walks a mapping, calling the handler of each known key and reporting unknown and
// repeated keys. It returns false when n is not a mapping.
func (d *decoder) fields(n *yaml.Node, at string, handlers map[string]func(key, val *yaml.Node)) bool {
	if n.Kind != yaml.MappingNode {
		d.fail(n, at, "want a mapping, got %s", describe(n))
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.fail(k, at, "keys must be plain words, got %s", describe(k))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			d.fail(k, join(at, k.Value), "repeated key (first at line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		h, ok := handlers[k.Value]
		if !ok {
			d.fail(k, at, "unknown key %q%s", k.Value, suggest(k.Value, handlers))
			continue
		}
		h(k, v)
	}
	return true
}

func join(at, key string) string {
	if at == "" {
		return key
	}
	return at + "." + key
}

// suggest names the closest known key, or lists them all.
func suggest(key string, handlers map[string]func(key, val *yaml.Node)) string {
	names := make([]string, 0, len(handlers))
	for k := range handlers {
		names = append(names, k)
	}
	sort.Strings(names)
	best, bestD := "", 3
	for _, k := range names {
		if dist := editDistance(strings.ToLower(key), strings.ToLower(k)); dist < bestD {
			best, bestD = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (known keys: " + strings.Join(names, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func (d *decoder) top(n *yaml.Node, p *Policy) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return
	}
	d.fields(n, "", map[string]func(k, v *yaml.Node){
		"version": func(k, v *yaml.Node) {
			if ver, ok := d.integer(v, "version"); ok && ver != 1 {
				d.fail(v, "version", "unsupported version %d (this stormwatch reads version 1)", ver)
			}
		},
		"defaults": func(k, v *yaml.Node) {
			p.Defaults.Pos = d.pos(k)
			var r Rules
			d.fields(v, "defaults", d.ruleHandlers("defaults", &r))
			r.merge(builtinRules())
			p.Defaults.Rules = r
		},
		"classes": func(k, v *yaml.Node) { p.Classes = d.classes(v) },
		"detectors": func(k, v *yaml.Node) {
			d.fields(v, "detectors", d.detectorHandlers(p))
		},
		"whatIf": func(k, v *yaml.Node) { p.WhatIf = d.whatIf(v) },
	})
}

func (d *decoder) classes(n *yaml.Node) []Class {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, "classes", "want a list of classes, got %s", describe(n))
		return nil
	}
	out := make([]Class, 0, len(n.Content))
	names := map[string]int{}
	for i, item := range n.Content {
		item = resolve(item)
		at := fmt.Sprintf("classes[%d]", i)
		c := Class{Pos: d.pos(item)}
		h := d.ruleHandlers(at, &c.Rules)
		var nameNode, matchNode *yaml.Node
		h["name"] = func(k, v *yaml.Node) {
			nameNode = k
			if s, ok := d.word(v, join(at, "name")); ok {
				c.Name = s
				if line, dup := names[s]; dup {
					d.fail(v, join(at, "name"), "class %q is already defined at line %d", s, line)
				}
				names[s] = v.Line
			}
		}
		h["match"] = func(k, v *yaml.Node) {
			matchNode = k
			c.Match = d.match(v, join(at, "match"))
		}
		if !d.fields(item, at, h) {
			continue
		}
		if nameNode == nil {
			d.fail(item, at, "a class needs a name")
		}
		if matchNode == nil {
			d.fail(item, at, "a class needs a match (operation, service, dependency or route)")
		}
		out = append(out, c)
	}
	return out
}

func (d *decoder) match(n *yaml.Node, at string) Match {
	var m Match
	pattern := func(dst *string, key string) func(k, v *yaml.Node) {
		return func(k, v *yaml.Node) {
			s, ok := d.word(v, join(at, key))
			if !ok {
				return
			}
			if _, err := path.Match(s, ""); err != nil {
				d.fail(v, join(at, key), "bad pattern %q: %v", s, err)
				return
			}
			*dst = s
		}
	}
	if !d.fields(n, at, map[string]func(k, v *yaml.Node){
		"operation":  pattern(&m.Operation, "operation"),
		"service":    pattern(&m.Service, "service"),
		"dependency": pattern(&m.Dependency, "dependency"),
		"route":      pattern(&m.Route, "route"),
	}) {
		return m
	}
	if m == (Match{}) && len(n.Content) == 0 {
		d.fail(n, at, "empty match: give operation, service, dependency or route")
	}
	return m
}

// ruleHandlers decode the checklist fields into r.
func (d *decoder) ruleHandlers(at string, r *Rules) map[string]func(k, v *yaml.Node) {
	return map[string]func(k, v *yaml.Node){
		"owner": func(k, v *yaml.Node) {
			if s, ok := d.word(v, join(at, "owner")); ok {
				r.Owner = Setting[string]{Value: s, Set: true, Pos: d.pos(k)}
			}
		},
		"retryable": func(k, v *yaml.Node) {
			if o, ok := d.outcomes(v, join(at, "retryable")); ok {
				r.Retryable = Setting[Outcomes]{Value: o, Set: true, Pos: d.pos(k)}
			}
		},
		"maxAttempts": func(k, v *yaml.Node) {
			p := join(at, "maxAttempts")
			if n, ok := d.integer(v, p); ok {
				if n < 1 {
					d.fail(v, p, "must be at least 1 (1 means no retries), got %d", n)
					return
				}
				r.MaxAttempts = Setting[int]{Value: n, Set: true, Pos: d.pos(k)}
			}
		},
		"deadline": func(k, v *yaml.Node) {
			p := join(at, "deadline")
			if dur, ok := d.duration(v, p); ok {
				if dur <= 0 {
					d.fail(v, p, "must be positive, got %s", v.Value)
					return
				}
				r.Deadline = Setting[time.Duration]{Value: dur, Set: true, Pos: d.pos(k)}
			}
		},
		"backoff": func(k, v *yaml.Node) {
			if b, ok := d.backoff(v, join(at, "backoff")); ok {
				r.Backoff = Setting[Backoff]{Value: b, Set: true, Pos: d.pos(k)}
			}
		},
		"maxFanout": func(k, v *yaml.Node) {
			p := join(at, "maxFanout")
			if n, ok := d.integer(v, p); ok {
				if n < 1 {
					d.fail(v, p, "must be at least 1 (one origin per attempt), got %d", n)
					return
				}
				r.MaxFanout = Setting[int]{Value: n, Set: true, Pos: d.pos(k)}
			}
		},
		"retryBudget": func(k, v *yaml.Node) {
			if f, ok := d.ratio(v, join(at, "retryBudget")); ok {
				r.RetryBudget = Setting[float64]{Value: f, Set: true, Pos: d.pos(k)}
			}
		},
		"fallback": func(k, v *yaml.Node) {
			if s, ok := d.word(v, join(at, "fallback")); ok {
				r.Fallback = Setting[string]{Value: s, Set: true, Pos: d.pos(k)}
			}
		},
		"terminal": func(k, v *yaml.Node) {
			p := join(at, "terminal")
			s, ok := d.word(v, p)
			if !ok {
				return
			}
			switch {
			case s == "fail-fast" || s == "shed" || s == "fallback":
			case strings.HasPrefix(s, "fallback:") && len(s) > len("fallback:"):
			default:
				d.fail(v, p, "unknown terminal action %q (want fail-fast, shed, fallback or fallback:<name>)", s)
				return
			}
			r.Terminal = Setting[string]{Value: s, Set: true, Pos: d.pos(k)}
		},
		"idempotent": func(k, v *yaml.Node) {
			if b, ok := d.boolean(v, join(at, "idempotent")); ok {
				r.Idempotent = Setting[bool]{Value: b, Set: true, Pos: d.pos(k)}
			}
		},
	}
}

func (d *decoder) backoff(n *yaml.Node, at string) (Backoff, bool) {
	var b Backoff
	var baseNode, capNode *yaml.Node
	ok := true
	if !d.fields(n, at, map[string]func(k, v *yaml.Node){
		"base": func(k, v *yaml.Node) {
			dur, good := d.duration(v, join(at, "base"))
			if good && dur <= 0 {
				d.fail(v, join(at, "base"), "must be positive, got %s", v.Value)
				good = false
			}
			ok = ok && good
			b.Base, baseNode = dur, v
		},
		"cap": func(k, v *yaml.Node) {
			dur, good := d.duration(v, join(at, "cap"))
			if good && dur <= 0 {
				d.fail(v, join(at, "cap"), "must be positive, got %s", v.Value)
				good = false
			}
			ok = ok && good
			b.Cap, capNode = dur, v
		},
		"jitter": func(k, v *yaml.Node) {
			p := join(at, "jitter")
			if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!float" || v.ShortTag() == "!!int") {
				f, good := d.ratio(v, p)
				ok = ok && good
				b.JitterRatio = f
				return
			}
			s, good := d.word(v, p)
			switch {
			case !good:
			case s == JitterNone || s == JitterFull || s == JitterEqual || s == JitterDecorrelated:
				b.Jitter = s
				return
			default:
				d.fail(v, p, "unknown jitter %q (want none, full, equal, decorrelated or a ratio between 0 and 1)", s)
			}
			ok = false
		},
	}) {
		return b, false
	}
	if baseNode == nil {
		d.fail(n, at, "backoff needs a base")
		return b, false
	}
	if ok && capNode != nil && b.Cap < b.Base {
		d.fail(capNode, join(at, "cap"), "%s is below base %s", capNode.Value, baseNode.Value)
		return b, false
	}
	if capNode == nil {
		b.Cap = b.Base
	}
	if b.Jitter == "" && b.JitterRatio == 0 {
		b.Jitter = JitterNone
	}
	return b, ok
}

func (d *decoder) detectorHandlers(p *Policy) map[string]func(k, v *yaml.Node) {
	h := map[string]func(k, v *yaml.Node){
		"window": func(k, v *yaml.Node) {
			if dur, ok := d.duration(v, "detectors.window"); ok {
				if dur <= 0 {
					d.fail(v, "detectors.window", "must be positive, got %s", v.Value)
					return
				}
				p.Window = Setting[time.Duration]{Value: dur, Set: true, Pos: d.pos(k)}
			}
		},
	}
	for _, det := range d.detectors {
		if det == nil {
			continue
		}
		h[det.Name] = func(k, v *yaml.Node) {
			if s, ok := d.detector(det, k, v); ok {
				p.Detectors[det.Name] = s
			}
		}
	}
	return h
}

// detector decodes one detector's entry: enabled, severity and the fields det declares in its
// Settings, by their policy tags, each checked against its type and bounds.
func (d *decoder) detector(det *analyzer.Detector, k, v *yaml.Node) (DetectorSettings, bool) {
	at := "detectors." + det.Name
	s := DetectorSettings{Enabled: true, Pos: d.pos(k)}
	fields, err := analyzer.SettingFields(det.Settings)
	if err != nil {
		d.fail(k, at, "the detector's settings cannot be configured: %v", err)
		return s, false
	}
	var values reflect.Value
	if det.Settings != nil {
		values = reflect.New(reflect.TypeOf(det.Settings).Elem())
		values.Elem().Set(reflect.ValueOf(det.Settings).Elem())
		s.Values = values.Interface()
	}
	fh := map[string]func(k, v *yaml.Node){
		"enabled": func(k, v *yaml.Node) {
			if b, ok := d.boolean(v, join(at, "enabled")); ok {
				s.Enabled = b
			}
		},
		"severity": func(k, v *yaml.Node) {
			w, ok := d.word(v, join(at, "severity"))
			if !ok {
				return
			}
			sev, err := analyzer.ParseSeverity(w)
			if err != nil {
				d.fail(v, join(at, "severity"), "%v", err)
				return
			}
			s.Severity = Setting[analyzer.Severity]{Value: sev, Set: true, Pos: d.pos(k)}
		},
	}
	for _, f := range fields {
		fh[f.Key] = func(k, v *yaml.Node) {
			if d.setting(f, values.Elem().Field(f.Index), v, join(at, f.Key)) {
				if s.Set == nil {
					s.Set = map[string]Pos{}
				}
				s.Set[f.Key] = d.pos(k)
			}
		}
	}
	d.fields(v, at, fh)
	return s, true
}

// setting decodes n into dst, a field of a detector's settings described by f.
func (d *decoder) setting(f analyzer.SettingField, dst reflect.Value, n *yaml.Node, at string) bool {
	val := reflect.New(f.Type).Elem()
	switch {
	case f.Type == reflect.TypeFor[time.Duration]():
		dur, ok := d.duration(n, at)
		if !ok {
			return false
		}
		val.SetInt(int64(dur))
	case f.Type.Kind() == reflect.Int:
		i, ok := d.integer(n, at)
		if !ok {
			return false
		}
		val.SetInt(int64(i))
	case f.Type.Kind() == reflect.Float64:
		x, ok := d.number(n, at, f)
		if !ok {
			return false
		}
		val.SetFloat(x)
	case f.Type.Kind() == reflect.Bool:
		b, ok := d.boolean(n, at)
		if !ok {
			return false
		}
		val.SetBool(b)
	default:
		w, ok := d.word(n, at)
		if !ok {
			return false
		}
		val.SetString(w)
	}
	if msg := f.Check(val); msg != "" {
		d.fail(n, at, "%s, got %s", msg, n.Value)
		return false
	}
	dst.Set(val)
	return true
}

func (d *decoder) whatIf(n *yaml.Node) []Change {
	var items []*yaml.Node
	switch n.Kind {
	case yaml.SequenceNode:
		items = n.Content
	case yaml.ScalarNode:
		items = []*yaml.Node{n}
	default:
		d.fail(n, "whatIf", "want a list of changes such as edge.maxAttempts=1, got %s", describe(n))
		return nil
	}
	var out []Change
	for i, it := range items {
		it = resolve(it)
		at := fmt.Sprintf("whatIf[%d]", i)
		s, ok := d.word(it, at)
		if !ok {
			continue
		}
		cs, err := ParseChanges(s)
		if err != nil {
			d.fail(it, at, "%v", err)
			continue
		}
		for j := range cs {
			cs[j].Pos = d.pos(it)
		}
		out = append(out, cs...)
	}
	return out
}

// word reads a non-empty string scalar.
func (d *decoder) word(n *yaml.Node, at string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, at, "want a string, got %s", describe(n))
		return "", false
	}
	if strings.TrimSpace(n.Value) == "" {
		d.fail(n, at, "must not be empty")
		return "", false
	}
	return n.Value, true
}

// boolean reads true or false.
func (d *decoder) boolean(n *yaml.Node, at string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.fail(n, at, "want true or false, got %s", describe(n))
		return false, false
	}
	b, _ := strconv.ParseBool(strings.ToLower(n.Value))
	return b, true
}

// number reads a finite number for the detector setting f, whose bounds it names when the value
// is not a number at all.
func (d *decoder) number(n *yaml.Node, at string, f analyzer.SettingField) (float64, bool) {
	want := "a number"
	if f.Min != "" && f.Max != "" {
		want += " between " + f.Min + " and " + f.Max
	}
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!float" && tag != "!!int") {
		d.fail(n, at, "want %s, got %s", want, describe(n))
		return 0, false
	}
	x, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		d.fail(n, at, "want %s, got %s", want, describe(n))
		return 0, false
	}
	return x, true
}

func (d *decoder) integer(n *yaml.Node, at string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n, at, "want an integer, got %s", describe(n))
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 32)
	if err != nil {
		d.fail(n, at, "want an integer, got %s", describe(n))
		return 0, false
	}
	return int(v), true
}

func (d *decoder) ratio(n *yaml.Node, at string) (float64, bool) {
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!float" && tag != "!!int") {
		d.fail(n, at, "want a number between 0 and 1, got %s", describe(n))
		return 0, false
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
		d.fail(n, at, "must be a ratio between 0 and 1, got %s", n.Value)
		return 0, false
	}
	return f, true
}

// duration reads Go's duration syntax. A bare number is refused: "2" could mean seconds or
// milliseconds, and a policy must not be read two ways.
func (d *decoder) duration(n *yaml.Node, at string) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, at, "want a duration such as 250ms or 2s, got %s", describe(n))
		return 0, false
	}
	if tag := n.ShortTag(); tag == "!!int" || tag == "!!float" {
		d.fail(n, at, "want a duration with a unit such as 250ms or 2s, got %s", n.Value)
		return 0, false
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, at, "want a duration such as 250ms or 2s, got %q", n.Value)
		return 0, false
	}
	return v, true
}

func (d *decoder) outcomes(n *yaml.Node, at string) (Outcomes, bool) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, at, "want a list of outcomes such as [timeout, 503], got %s", describe(n))
		return Outcomes{}, false
	}
	var o Outcomes
	ok := true
	for i, it := range n.Content {
		it = resolve(it)
		p := fmt.Sprintf("%s[%d]", at, i)
		if it.Kind != yaml.ScalarNode || it.ShortTag() == "!!null" {
			d.fail(it, p, "want an outcome, got %s", describe(it))
			ok = false
			continue
		}
		t, err := parseOutcome(it.Value)
		if err != nil {
			d.fail(it, p, "%v", err)
			ok = false
			continue
		}
		o.tokens = append(o.tokens, t)
	}
	return o, ok
}
