package alerts

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/prometheus/common/model"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/metrics"
	"github.com/stormwatch/stormwatch/analyzer/passes/postdeadline"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryamplification"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrybudgetexceeded"
	"github.com/stormwatch/stormwatch/analyzer/policy"
)

// Options shape the rules; the zero value is the documented defaults.
type Options struct {
	// Range is the window of rate() and increase(): how much traffic one evaluation judges.
	// Default 5m.
	Range time.Duration
	// For is how long an amplification or a collector problem must last before its alert fires
	// (0: at the first evaluation that sees it; the command's default is DefaultFor). Findings
	// alerts fire at once: a finding already judges a trace or a window.
	For time.Duration
	// Command is the command line that generated the rules, quoted in the file's header.
	Command string
}

// Defaults of Options.
const (
	DefaultRange = 5 * time.Minute
	DefaultFor   = 2 * time.Minute
)

// Alert names: the stable contract a routing tree or a silence refers to (docs/alerts.md).
const (
	AlertAmplification   = "StormwatchAmplificationAboveLimit"
	AlertWorkAfterGiveUp = "StormwatchWorkAfterGiveUp"
	AlertRetryBudget     = "StormwatchRetryBudgetExceeded"
	AlertDroppingSpans   = "StormwatchCollectorDroppingSpans"
	AlertRefusing        = "StormwatchCollectorRefusingRequests"
	AlertNotAnalyzed     = "StormwatchSpansNotAnalyzed"
)

// Labels every alert routes by.
const (
	LabelSeverity   = "severity"
	LabelDependency = "dependency"
	LabelCaller     = "caller"
	LabelClass      = "policy_class"
)

// The collector's own series (collector package; docs/collector.md lists them).
const (
	collectorRejected = "stormwatch_collector_rejected_spans_total"
	collectorRequests = "stormwatch_collector_requests_total"
	collectorRefused  = "stormwatch_collector_refused_connections_total"
	evictedSpans      = "stormwatch_evicted_spans_total"
)

// byDep is the grouping every dependency rule keeps.
var byDep = strings.Join([]string{metrics.LabelDependency, metrics.LabelDependencyService, metrics.LabelCaller}, ", ")

// Templates of the routing labels: the dependency by its service.name where the series carry
// one, else by the address.
var (
	depTmpl    = fmt.Sprintf(`{{ if $labels.%[1]s }}{{ $labels.%[1]s }}{{ else }}{{ $labels.%[2]s }}{{ end }}`, metrics.LabelDependencyService, metrics.LabelDependency)
	callerTmpl = fmt.Sprintf(`{{ $labels.%s }}`, metrics.LabelCaller)
)

// Rules renders p (policy.Default() when no file was given) as a Prometheus rule file.
func Rules(p *policy.Policy, o Options) ([]byte, error) {
	if p == nil {
		p = policy.Default()
	}
	if o.Range <= 0 {
		o.Range = DefaultRange
	}
	if o.For < 0 {
		return nil, fmt.Errorf("--for must not be negative, got %s", o.For)
	}
	g := &gen{p: p, o: o, rng: promDuration(o.Range)}
	doc := mapping("groups", seq(mapping(
		"name", scalar("stormwatch"),
		"rules", seq(g.rules()...),
	)))
	doc.HeadComment = g.header()
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}); err != nil {
		return nil, fmt.Errorf("render rules: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("render rules: %w", err)
	}
	return buf.Bytes(), nil
}

type gen struct {
	p   *policy.Policy
	o   Options
	rng string
	// notes go to the file's header: what the rules could not express, and the defaults used.
	notes []string
}

// ratioRecord is the recording rule every amplification alert reads.
func (g *gen) ratioRecord() string {
	return "stormwatch_caller:amplification:ratio_rate" + g.rng
}

func (g *gen) rules() []*yaml.Node {
	rec := mapping(
		"record", scalar(g.ratioRecord()),
		"expr", scalar(fmt.Sprintf("sum by (%[1]s) (rate(%[2]s[%[4]s]))\n/\nsum by (%[1]s) (rate(%[3]s[%[4]s]))\n",
			byDep, metrics.NameCallerPhysical, metrics.NameCallerLogical, g.rng)),
	)
	rec.HeadComment = "Calls per intent from each caller to each dependency over the last " + g.rng +
		": the amplification the alerts below compare with the policy's limits."
	out := []*yaml.Node{rec}
	out = append(out, g.amplification()...)
	out = append(out, g.findings()...)
	out = append(out, g.collector()...)
	return out
}

func (g *gen) header() string {
	src := "the built-in defaults (no --policy given)"
	if g.p.File != "" {
		src = "the policy " + g.p.File
	}
	lines := []string{
		"Prometheus alerting rules for stormwatch, generated from " + src + ".",
		"Regenerate them when the policy changes; load them with rule_files in prometheus.yml",
		"and check them with: promtool check rules FILE.",
	}
	if g.o.Command != "" {
		lines = append(lines, "Command: "+g.o.Command)
	}
	lines = append(lines,
		"",
		"They read stormwatch's /metrics (stormwatch collect, or the dashboard's collector): run it with",
		"the same --policy, so its detectors judge findings by the same rules. docs/alerts.md explains each alert.",
		"Rates over "+g.rng+"; amplification and collector alerts must hold for "+promDuration(g.o.For)+" before they fire.",
	)
	if len(g.notes) > 0 {
		lines = append(lines, "")
		lines = append(lines, g.notes...)
	}
	return strings.Join(lines, "\n")
}

// limit is a class's amplification limit: calls per intent a compliant caller stays within (one
// retry owner, at most maxAttempts tries, each reaching at most maxFanout origins).
type limit struct {
	calls int
	why   string // "maxAttempts 3 (policy.yaml:12) x maxFanout 1 (built-in default)"
}

func classLimit(c *policy.Class) limit {
	at := func(s policy.Setting[int]) string {
		if s.Set {
			return s.Pos.FileLine()
		}
		return "built-in default"
	}
	return limit{
		calls: c.MaxAttempts.Value * c.MaxFanout.Value,
		why:   fmt.Sprintf("maxAttempts %d (%s) x maxFanout %d (%s)", c.MaxAttempts.Value, at(c.MaxAttempts), c.MaxFanout.Value, at(c.MaxFanout)),
	}
}

// criticalFactor is retry-amplification's: from this many calls per request a storm is critical.
func (g *gen) criticalFactor() int {
	if s, ok := g.p.Detector(retryamplification.Detector.Name).Values.(*retryamplification.Settings); ok && s != nil {
		return s.CriticalFactor
	}
	return retryamplification.Detector.Settings.(*retryamplification.Settings).CriticalFactor
}

// selector is the ratio series of the dependencies and callers a class matches, or "" when its
// match uses what the metrics do not carry (operation, route).
func (g *gen) selector(m policy.Match) string {
	if m == (policy.Match{}) || m.Operation != "" || m.Route != "" {
		return ""
	}
	var caller string
	if m.Service != "" {
		caller = matcher(metrics.LabelCaller, m.Service)
	}
	one := func(ms ...string) string {
		var keep []string
		for _, x := range ms {
			if x != "" {
				keep = append(keep, x)
			}
		}
		return g.ratioRecord() + "{" + strings.Join(keep, ", ") + "}"
	}
	if m.Dependency == "" {
		return one(caller)
	}
	// A class's dependency is the dependency's name, the callee's service.name or an address;
	// the metrics carry names only, so an address is matched as the name the analyzer gives a
	// callee known by its address alone (its host).
	expr := one(caller, matcher(metrics.LabelDependency, m.Dependency)) + " or " +
		one(caller, matcher(metrics.LabelDependencyService, m.Dependency))
	if name := analyzer.HostDependency(m.Dependency); name != m.Dependency {
		expr += " or " + one(caller, matcher(metrics.LabelDependency, name))
	}
	return expr
}

func (g *gen) amplification() []*yaml.Node {
	cf := g.criticalFactor()
	var earlier []string
	var rules []*yaml.Node
	for i := range g.p.Classes {
		c := &g.p.Classes[i]
		sel := g.selector(c.Match)
		if sel == "" {
			g.notes = append(g.notes, fmt.Sprintf("Class %q (%s) matches by operation or route, which the metrics do not carry:", c.Name, c.Pos.FileLine()),
				"  its traffic is judged by the class or defaults that match its caller and dependency.")
			continue
		}
		rules = append(rules, g.ampRules(fmt.Sprintf("class %s (%s)", c.Name, c.Pos.FileLine()), c.Name, sel, earlier, classLimit(c), cf)...)
		earlier = append(earlier, sel)
	}
	d := classLimit(&g.p.Defaults)
	if !g.p.Defaults.MaxAttempts.Set || !g.p.Defaults.MaxFanout.Set {
		g.notes = append(g.notes, fmt.Sprintf("Defaults: %s: where the policy names no limit, the built-in default applies.", d.why))
	}
	return append(rules, g.ampRules("the defaults", "defaults", g.ratioRecord(), earlier, d, cf)...)
}

// ampRules are the warning above a limit and, from the critical factor, the critical one, over
// the series sel holds and no earlier class claimed (the first class that matches wins).
func (g *gen) ampRules(what, class, sel string, earlier []string, l limit, cf int) []*yaml.Node {
	base := "(" + sel + ")"
	if len(earlier) > 0 {
		base = "((" + sel + ") unless (" + strings.Join(earlier, " or ") + "))"
	}
	summary := fmt.Sprintf(`%s sends {{ printf "%%.2f" $value }} calls per intent to %s; the policy allows %d`, callerTmpl, depTmpl, l.calls)
	desc := fmt.Sprintf("Look at: the retry-amplification and unbounded-retries findings for this dependency "+
		"(the stormwatch dashboard, or GET /api/v1/report) - which layers retried and how often. "+
		"Policy: %s, %s. "+
		"Change: keep one retry owner on the path to this dependency, cap its attempts at %d and remove the retry loops below it; "+
		"if the load is intended, raise maxAttempts in the policy and regenerate these rules.",
		tmplText(what), tmplText(l.why), l.calls)
	rule := func(sev, expr string) *yaml.Node {
		n := mapping(
			"alert", scalar(AlertAmplification),
			"expr", scalar(expr),
			"for", scalar(promDuration(g.o.For)),
			"labels", mapping(
				LabelSeverity, scalar(sev),
				LabelDependency, scalar(depTmpl),
				LabelCaller, scalar(callerTmpl),
				LabelClass, scalar(tmplText(class)),
			),
			"annotations", mapping(
				"summary", scalar(summary),
				"description", scalar(desc),
			),
		)
		n.HeadComment = fmt.Sprintf("%s: at most %d calls per intent, from %s; critical from %d (retry-amplification's criticalFactor).", capital(what), l.calls, l.why, cf)
		if cf <= l.calls+1 {
			n.HeadComment = fmt.Sprintf("%s: at most %d calls per intent, from %s; at or over retry-amplification's criticalFactor (%d), any excess is critical.", capital(what), l.calls, l.why, cf)
		}
		if sev == "warning" {
			n.HeadComment = fmt.Sprintf("%s: at most %d calls per intent, from %s.", capital(what), l.calls, l.why)
		}
		return n
	}
	if cf <= l.calls+1 {
		// Anything above the limit is already a storm by retry-amplification's measure.
		n := rule("critical", fmt.Sprintf("%s > %d", base, l.calls))
		return []*yaml.Node{n}
	}
	return []*yaml.Node{
		rule("warning", fmt.Sprintf("%s > %d", base, l.calls)),
		rule("critical", fmt.Sprintf("%s > %d >= %d", base, l.calls, cf)),
	}
}

func (g *gen) findings() []*yaml.Node {
	var out []*yaml.Node
	sev := fmt.Sprintf(`{{ $labels.%s }}`, metrics.LabelSeverity)
	labels := func() *yaml.Node {
		return mapping(LabelSeverity, scalar(sev), LabelDependency, scalar(depTmpl), LabelCaller, scalar(callerTmpl))
	}
	grp := byDep + ", " + metrics.LabelSeverity

	if name := postdeadline.Detector.Name; g.p.Enabled(name) {
		sel := fmt.Sprintf(`%s{%s}`, metrics.NameDependencyFindings, matcher(metrics.LabelDetector, name))
		// A counter's first sample shows no increase, so a series born within the range counts too.
		expr := fmt.Sprintf("sum by (%[1]s) (increase(%[2]s[%[3]s])) > 0\nor\nsum by (%[1]s) (%[2]s unless %[2]s offset %[3]s)\n", grp, sel, g.rng)
		n := mapping(
			"alert", scalar(AlertWorkAfterGiveUp),
			"expr", scalar(expr),
			"labels", labels(),
			"annotations", mapping(
				"summary", scalar(fmt.Sprintf("%s went on calling %s after its caller gave up: work done for nobody", callerTmpl, depTmpl)),
				"description", scalar("Look at: the post-deadline-work findings for this dependency (the stormwatch dashboard, or GET /api/v1/report): "+
					"the trace, the deadline or give-up, and the calls that started after it. "+
					"Change: propagate the caller's deadline (context deadline, Request-Deadline header or baggage) and check it before every call, "+
					"so the worker stops when its caller gives up."+g.ruleCite(func(r *policy.Rules) policy.Pos { return r.Deadline.Pos }, "deadline")),
			),
		)
		n.HeadComment = "Work after give-up: a post-deadline-work finding in the last " + g.rng + "."
		out = append(out, n)
	} else {
		g.notes = append(g.notes, "post-deadline-work is turned off in the policy: no "+AlertWorkAfterGiveUp+" alert.")
	}

	if name := retrybudgetexceeded.Detector.Name; g.p.Enabled(name) {
		n := mapping(
			"alert", scalar(AlertRetryBudget),
			"expr", scalar(fmt.Sprintf("max by (%s) (%s{%s}) > 0", grp, metrics.NameWindowFindings, matcher(metrics.LabelDetector, name))),
			"labels", labels(),
			"annotations", mapping(
				"summary", scalar(fmt.Sprintf("%s's retries to %s are over its retry budget", callerTmpl, depTmpl)),
				"description", scalar("Look at: the retry-budget-exceeded finding for this caller and dependency (the stormwatch dashboard, or GET /api/v1/report): "+
					"retries per first attempt over the window, and the outcomes that were retried. "+
					"Change: give the caller's retry loop a token-bucket budget at the policy's ratio (the reference client's RetryBudget), "+
					"so retries stop adding load when the dependency is failing."+g.budgetCite()),
			),
		)
		n.HeadComment = "Retry budgets: a retry-budget-exceeded finding in the cross-trace detectors' latest window (" +
			promDuration(g.p.Window.Value) + ", the policy's detectors.window)."
		out = append(out, n)
	} else {
		g.notes = append(g.notes, "retry-budget-exceeded is turned off in the policy: no "+AlertRetryBudget+" alert.")
	}
	return out
}

// budgetCite says which retryBudget applies: the defaults' and every class that sets its own.
func (g *gen) budgetCite() string {
	b := g.p.Defaults.RetryBudget
	s := fmt.Sprintf(" Policy: retryBudget %g (%s)", b.Value, posOrDefault(b))
	var classes []string
	for i := range g.p.Classes {
		c := &g.p.Classes[i]
		if c.RetryBudget.Set && c.RetryBudget.Pos != b.Pos {
			classes = append(classes, fmt.Sprintf("%g for class %s (%s)", c.RetryBudget.Value, c.Name, c.RetryBudget.Pos.FileLine()))
		}
	}
	if len(classes) > 0 {
		s += ", " + strings.Join(classes, ", ")
	}
	return tmplText(s + ".")
}

// ruleCite names where the policy sets a rule, when it does anywhere.
func (g *gen) ruleCite(pos func(*policy.Rules) policy.Pos, rule string) string {
	var at []string
	if p := pos(&g.p.Defaults.Rules); !p.IsZero() {
		at = append(at, p.FileLine())
	}
	for i := range g.p.Classes {
		if p := pos(&g.p.Classes[i].Rules); !p.IsZero() && !contains(at, p.FileLine()) {
			at = append(at, p.FileLine())
		}
	}
	if len(at) == 0 {
		return ""
	}
	return tmplText(fmt.Sprintf(" Policy: %s at %s.", rule, strings.Join(at, ", ")))
}

func (g *gen) collector() []*yaml.Node {
	forD := promDuration(g.o.For)
	rule := func(name, comment, expr, summary, desc string) *yaml.Node {
		n := mapping(
			"alert", scalar(name),
			"expr", scalar(expr),
			"for", scalar(forD),
			"labels", mapping(LabelSeverity, scalar("warning")),
			"annotations", mapping("summary", scalar(summary), "description", scalar(desc)),
		)
		n.HeadComment = comment
		return n
	}
	return []*yaml.Node{
		rule(AlertDroppingSpans,
			"The collector dropped spans it was sent: the analysis misses them.",
			fmt.Sprintf("sum by (job, instance, reason) (rate(%s[%s])) > 0", collectorRejected, g.rng),
			`stormwatch at {{ $labels.instance }} is dropping spans ({{ $labels.reason }}): {{ printf "%.1f" $value }} spans/s`,
			"Look at: stormwatch_collector_rejected_spans_total by reason, the queue (stormwatch_collector_queue_depth, _queue_bytes) and the status line. "+
				"Change: for overloaded, raise --queue-size or --max-queue-bytes, or spread the traffic over more collectors (docs/scale.md); "+
				"for invalid, fix the exporter that sends malformed spans; for shutting_down, nothing (a restart); "+
				"for consumer, check the log for the analyzer's or the recorder's error."),
		rule(AlertRefusing,
			"The collector refused export requests or connections: exporters retry or drop what they hold.",
			fmt.Sprintf("sum by (job, instance, transport, outcome) (rate(%s{outcome=~\"overloaded|too_large|unauthenticated|internal\"}[%[2]s])) > 0\nor\n"+
				"label_replace(sum by (job, instance, transport) (rate(%[3]s[%[2]s])), \"outcome\", \"connection_refused\", \"\", \"\") > 0\n",
				collectorRequests, g.rng, collectorRefused),
			`stormwatch at {{ $labels.instance }} refuses {{ $labels.transport }} requests ({{ $labels.outcome }})`,
			"Look at: stormwatch_collector_requests_total by outcome and stormwatch_collector_refused_connections_total. "+
				"Change: for overloaded, raise --queue-size or --max-queue-bytes; for too_large, raise --max-request-bytes or lower the exporter's batch size; "+
				"for unauthenticated, give the exporter the --token-file token; for connection_refused, raise --max-connections "+
				"or make exporters share connections; for internal, read the log."),
		rule(AlertNotAnalyzed,
			"Spans accepted but not analyzed: evicted to stay within --max-spans, or over the per-trace cap.",
			fmt.Sprintf("sum by (job, instance) (rate(%s[%[2]s])) > 0\nor\nsum by (job, instance) (rate(%[3]s[%[2]s])) > 0\n", evictedSpans, g.rng, metrics.NameTruncSpans),
			`stormwatch at {{ $labels.instance }} drops {{ printf "%.1f" $value }} spans/s from its analysis`,
			"Look at: stormwatch_evicted_spans_total, stormwatch_truncated_spans_total and stormwatch_held_spans. "+
				"Change: raise --max-spans (about 0.15-0.4 KiB a span, docs/collector.md), shorten --settle, "+
				"or shard traces over several collectors (docs/scale.md); truncated traces are over 50,000 spans: look for a loop in the instrumented code."),
	}
}

// matcher is label="value" for a plain name and label=~"regex" for a policy pattern.
func matcher(label, pattern string) string {
	if !strings.ContainsAny(pattern, `*?[\`) {
		return label + "=" + strconv.Quote(pattern)
	}
	return label + "=~" + strconv.Quote(globRegexp(pattern))
}

// globRegexp is the RE2 form of a path.Match pattern (the policy's match syntax), anchored by
// Prometheus: * and ? do not cross '/', as in path.Match.
func globRegexp(pattern string) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(`[^/]*`)
		case '?':
			b.WriteString(`[^/]`)
		case '\\':
			if i+1 < len(pattern) {
				i++
				b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
			}
		case '[':
			end := strings.IndexByte(pattern[i+1:], ']')
			if end < 0 { // refused by the policy loader; quoted to stay valid
				b.WriteString(regexp.QuoteMeta(pattern[i:]))
				return b.String()
			}
			class := pattern[i+1 : i+1+end]
			b.WriteByte('[')
			if strings.HasPrefix(class, "^") {
				b.WriteByte('^')
				class = class[1:]
			}
			b.WriteString(strings.ReplaceAll(class, `]`, `\]`))
			b.WriteByte(']')
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// tmplText keeps text from the policy (class names, file paths) from being read as a Prometheus
// template.
func tmplText(s string) string {
	if !strings.Contains(s, "{{") && !strings.Contains(s, "}}") {
		return s
	}
	r := strings.NewReplacer("{{", `{{ "{{" }}`, "}}", `{{ "}}" }}`)
	return r.Replace(s)
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func posOrDefault[T any](s policy.Setting[T]) string {
	if s.Set {
		return s.Pos.FileLine()
	}
	return "built-in default"
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// promDuration is Prometheus's duration syntax (5m, 1h30m, 10s).
func promDuration(d time.Duration) string { return model.Duration(d).String() }

func scalar(v string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	if strings.Contains(v, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Content: items}
}

// mapping builds a YAML mapping from key, value pairs, in order.
func mapping(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, scalar(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}
