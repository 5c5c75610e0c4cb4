package diff

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
)

// Version is the version of the diff's JSON document; bump it when a field is renamed or removed.
// Version 2 names the counts calls and intents, as the analyze report's version 2 does.
const Version = 2

// DefaultTolerance is the relative growth of an amplification that is still "the same": 5%.
const DefaultTolerance = 0.05

// Input is what is compared.
type Input struct {
	// Before and After are the two analyses; their labels say where each came from (a file, a
	// window of it, a collector's URL) and are printed as given.
	Before, After           *analyzer.Report
	BeforeLabel, AfterLabel string
	// Prediction, when set, is a what-if made from the before side's operations; the diff sets it
	// beside what After measured.
	Prediction *whatif.Prediction
}

// Options are the thresholds. The zero value is usable: no tolerance, new info findings count.
type Options struct {
	// Tolerance is the relative growth of a dependency's amplification (0.05: 5%) that is not yet
	// a regression, and the relative error of a prediction that is not yet "the model was wrong".
	Tolerance float64
	// FailOn is the least severity of a new finding that makes the after side worse.
	FailOn analyzer.Severity
}

// Figures are one side's numbers for a dependency or a caller.
type Figures struct {
	PhysicalCalls     int     `json:"calls"`
	LogicalOperations int     `json:"intents"`
	Amplification     float64 `json:"amplification"`
	// LayerProduct is the largest retry-amplification factor at the dependency (the product of
	// attempts per retrying layer for one request); 0 when no two layers retried.
	LayerProduct int `json:"layer_product,omitempty"`
	// Layers are the retrying layers behind LayerProduct, top first, as the finding lists them:
	// of a chain of more than 64, the 32 at the top and the 32 nearest the leaf.
	Layers []Layer `json:"layers,omitempty"`
	// LayersNotListed counts the retrying layers between those two halves (the finding's
	// layers_not_listed), 0 when Layers are all of them.
	LayersNotListed int `json:"layers_not_listed,omitempty"`
}

// Layer is one retrying layer of a retry-amplification finding.
type Layer struct {
	Service  string `json:"service"`
	Attempts int    `json:"attempts"`
}

// Dependency is one dependency before and after. Before or After is nil when the dependency is
// absent from that side.
type Dependency struct {
	// Dependency is the name both reports gave it (see analyzer.DependencyStats): the key the
	// sides are matched on, so a callee whose port or pod IPs moved between runs is one row.
	Dependency string `json:"dependency"`
	Service    string `json:"service,omitempty"`
	// Origins are its addresses on either side (the after side's first), at most eight: detail.
	Origins []string `json:"origins,omitempty"`
	Before  *Figures `json:"before"`
	After   *Figures `json:"after"`
	// Change is After's amplification minus Before's (0 when either is absent).
	Change float64 `json:"amplification_change"`
	// Worse is true when the amplification grew by more than the tolerance.
	Worse   bool     `json:"worse"`
	Callers []Caller `json:"by_caller,omitempty"`
}

// Name is how a person calls the dependency: its service when known, else its address.
func (d *Dependency) Name() string { return cmp.Or(d.Service, d.Dependency) }

// Caller is one calling service's figures toward a dependency, before and after.
type Caller struct {
	Caller string   `json:"caller"`
	Before *Figures `json:"before"`
	After  *Figures `json:"after"`
	Change float64  `json:"amplification_change"`
}

// State says what became of a finding's place.
type State string

// States.
const (
	Resolved   State = "resolved"
	New        State = "new"
	Persisting State = "persisting"
)

// Finding is one detector at one place (caller -> dependency), counted on each side.
type Finding struct {
	Detector string `json:"detector"`
	// Severity is the highest on the after side when the place is there, else the before side's.
	Severity   analyzer.Severity `json:"severity"`
	Service    string            `json:"service,omitempty"`
	Dependency string            `json:"dependency,omitempty"`
	State      State             `json:"state"`
	Before     int               `json:"before"`
	After      int               `json:"after"`
	// BeforeRate and AfterRate are the counts per thousand operations analyzed on each side
	// (InputStats.Operations, every layer's), so a side with more traffic is not worse for it.
	BeforeRate float64 `json:"before_per_1k_operations"`
	AfterRate  float64 `json:"after_per_1k_operations"`
	// Summary is one finding's summary: the after side's when the place is there, else the before's.
	Summary string `json:"summary"`
}

// Place is "caller -> dependency" ("-" for a missing caller).
func (f *Finding) Place() string {
	p := cmp.Or(f.Service, "-")
	if f.Dependency != "" {
		p += " -> " + f.Dependency
	}
	return p
}

// Counts are how many places were resolved, are new, persist.
type Counts struct {
	Resolved   int `json:"resolved"`
	New        int `json:"new"`
	Persisting int `json:"persisting"`
}

// Side describes one input.
type Side struct {
	Label string              `json:"label"`
	Input analyzer.InputStats `json:"input"`
}

// Report is the comparison: the --format json document of `stormwatch diff`.
type Report struct {
	Version int `json:"version"`
	// Verdict is the one line a person reads first.
	Verdict string `json:"verdict"`
	// Worse is true when a dependency's amplification grew beyond the tolerance or a new finding
	// at or above the fail-on severity appeared; Regressions say which.
	Worse       bool     `json:"worse"`
	Regressions []string `json:"regressions,omitempty"`
	Tolerance   float64  `json:"tolerance"`
	Before      Side     `json:"before"`
	After       Side     `json:"after"`
	// Dependencies are the union of both sides, the largest amplification change first.
	Dependencies []Dependency `json:"dependencies"`
	Findings     []Finding    `json:"findings"`
	Counts       Counts       `json:"finding_counts"`
	WhatIf       *WhatIf      `json:"what_if,omitempty"`
	// Costs are what retries cost per entry point and dependency, before and after.
	Costs []Cost `json:"costs,omitempty"`
}

// Compare compares in.Before with in.After.
func Compare(in Input, opt Options) Report {
	before, after := orEmpty(in.Before), orEmpty(in.After)
	r := Report{Version: Version, Tolerance: opt.Tolerance,
		Before: Side{Label: in.BeforeLabel, Input: before.Input},
		After:  Side{Label: in.AfterLabel, Input: after.Input}}
	r.Dependencies = dependencies(before, after, opt)
	r.Findings, r.Counts = findings(before, after)
	r.Costs = costs(before, after)
	for _, d := range r.Dependencies {
		if d.Worse {
			r.Regressions = append(r.Regressions, fmt.Sprintf("%s: amplification %.2fx -> %.2fx (more than %s)",
				d.Name(), d.Before.Amplification, d.After.Amplification, percent(opt.Tolerance)))
		}
	}
	for _, f := range r.Findings {
		if f.State == New && f.Severity >= opt.FailOn {
			r.Regressions = append(r.Regressions, fmt.Sprintf("new %s %s at %s", f.Severity, f.Detector, f.Place()))
		}
	}
	r.Worse = len(r.Regressions) > 0
	if in.Prediction != nil {
		r.WhatIf = checkPrediction(in.Prediction, before, after, opt.Tolerance)
	}
	r.Verdict = verdict(&r, opt)
	return r
}

func orEmpty(r *analyzer.Report) *analyzer.Report {
	if r == nil {
		return &analyzer.Report{}
	}
	return r
}

func figures(calls, ops int, amp float64) *Figures {
	return &Figures{PhysicalCalls: calls, LogicalOperations: ops, Amplification: amp}
}

// maxOrigins is how many addresses a diff row lists.
const maxOrigins = 8

// OriginsText is the row's addresses as a table cell: the first and how many more.
func (d *Dependency) OriginsText() string {
	switch len(d.Origins) {
	case 0:
		return ""
	case 1:
		return d.Origins[0]
	}
	return d.Origins[0] + " +" + strconv.Itoa(len(d.Origins)-1)
}

func dependencies(before, after *analyzer.Report, opt Options) []Dependency {
	byName := map[string]*Dependency{}
	var order []string
	get := func(d *analyzer.DependencyStats) *Dependency {
		x := byName[d.Dependency]
		if x == nil {
			x = &Dependency{Dependency: d.Dependency}
			byName[d.Dependency] = x
			order = append(order, d.Dependency)
		}
		x.Service = cmp.Or(x.Service, d.Service)
		for _, o := range d.Origins {
			if len(x.Origins) < maxOrigins && !slices.Contains(x.Origins, o) {
				x.Origins = append(x.Origins, o)
			}
		}
		return x
	}
	// The after side first, so that a row's first origin is where the calls go now.
	for i := range after.Dependencies {
		d := &after.Dependencies[i]
		get(d).After = figures(d.PhysicalCalls, d.LogicalOperations, d.Amplification)
	}
	for i := range before.Dependencies {
		d := &before.Dependencies[i]
		get(d).Before = figures(d.PhysicalCalls, d.LogicalOperations, d.Amplification)
	}
	layerProducts(before, byName, func(d *Dependency) *Figures { return d.Before })
	layerProducts(after, byName, func(d *Dependency) *Figures { return d.After })
	out := make([]Dependency, 0, len(order))
	for _, name := range order {
		d := byName[name]
		if d.Before != nil && d.After != nil {
			d.Change = d.After.Amplification - d.Before.Amplification
			d.Worse = d.After.Amplification > d.Before.Amplification*(1+opt.Tolerance)+1e-9
		}
		d.Callers = callers(findDep(before, name), findDep(after, name))
		out = append(out, *d)
	}
	slices.SortStableFunc(out, func(a, b Dependency) int {
		return cmp.Or(cmp.Compare(math.Abs(b.Change), math.Abs(a.Change)), cmp.Compare(peak(b), peak(a)),
			cmp.Compare(a.Dependency, b.Dependency))
	})
	return out
}

// peak is the larger amplification of either side.
func peak(d Dependency) float64 {
	p := 0.0
	if d.Before != nil {
		p = d.Before.Amplification
	}
	if d.After != nil {
		p = max(p, d.After.Amplification)
	}
	return p
}

func findDep(r *analyzer.Report, name string) *analyzer.DependencyStats {
	for i := range r.Dependencies {
		if r.Dependencies[i].Dependency == name {
			return &r.Dependencies[i]
		}
	}
	return nil
}

func callers(before, after *analyzer.DependencyStats) []Caller {
	byName := map[string]*Caller{}
	var order []string
	get := func(name string) *Caller {
		c := byName[name]
		if c == nil {
			c = &Caller{Caller: name}
			byName[name] = c
			order = append(order, name)
		}
		return c
	}
	if before != nil {
		for _, c := range before.ByCaller {
			get(c.Caller).Before = figures(c.PhysicalCalls, c.LogicalOperations, c.Amplification)
		}
	}
	if after != nil {
		for _, c := range after.ByCaller {
			get(c.Caller).After = figures(c.PhysicalCalls, c.LogicalOperations, c.Amplification)
		}
	}
	out := make([]Caller, 0, len(order))
	for _, name := range order {
		c := byName[name]
		if c.Before != nil && c.After != nil {
			c.Change = c.After.Amplification - c.Before.Amplification
		}
		out = append(out, *c)
	}
	return out
}

// layerProducts reads the retry-amplification findings of r into the figures side picks: the
// largest factor per dependency and its layers.
func layerProducts(r *analyzer.Report, deps map[string]*Dependency, side func(*Dependency) *Figures) {
	for i := range r.Findings {
		f := &r.Findings[i]
		if f.Detector != "retry-amplification" {
			continue
		}
		d := deps[f.Dependency]
		if d == nil || side(d) == nil {
			continue
		}
		fig := side(d)
		factor, ok := number(f.Evidence["factor"])
		if !ok || factor <= fig.LayerProduct {
			continue
		}
		fig.LayerProduct = factor
		fig.Layers = layersOf(f.Evidence["layers"])
		fig.LayersNotListed, _ = number(f.Evidence["layers_not_listed"])
	}
}

// layersOf reads the layers evidence, as the analyzer makes it and as JSON brings it back.
func layersOf(v analyzer.Value) []Layer {
	rs, _ := v.Records()
	out := make([]Layer, 0, len(rs))
	for _, r := range rs {
		s, _ := r["service"].Text()
		n, _ := number(r["attempts"])
		out = append(out, Layer{Service: s, Attempts: n})
	}
	return out
}

// number reads a count: JSON brings back a whole number as an Int, but one written by hand may
// carry a fraction.
func number(v analyzer.Value) (int, bool) {
	x, ok := v.Number()
	return int(math.Round(x)), ok
}

type placeKey struct{ detector, service, dependency string }

func findings(before, after *analyzer.Report) ([]Finding, Counts) {
	byKey := map[placeKey]*Finding{}
	var order []placeKey
	add := func(f *analyzer.Finding, isAfter bool) {
		k := placeKey{f.Detector, f.Service, f.Dependency}
		x := byKey[k]
		if x == nil {
			x = &Finding{Detector: f.Detector, Service: f.Service, Dependency: f.Dependency, Severity: f.Severity, Summary: f.Summary}
			byKey[k] = x
			order = append(order, k)
		}
		if isAfter {
			if x.After == 0 || f.Severity > x.Severity {
				// The after side describes a place that is still there.
				x.Severity, x.Summary = f.Severity, f.Summary
			}
			x.After++
		} else {
			if x.After == 0 && f.Severity > x.Severity {
				x.Severity, x.Summary = f.Severity, f.Summary
			}
			x.Before++
		}
	}
	for i := range before.Findings {
		add(&before.Findings[i], false)
	}
	for i := range after.Findings {
		add(&after.Findings[i], true)
	}
	var c Counts
	out := make([]Finding, 0, len(order))
	for _, k := range order {
		f := byKey[k]
		switch {
		case f.After == 0:
			f.State = Resolved
			c.Resolved++
		case f.Before == 0:
			f.State = New
			c.New++
		default:
			f.State = Persisting
			c.Persisting++
		}
		f.BeforeRate = perThousand(f.Before, before.Input.Operations)
		f.AfterRate = perThousand(f.After, after.Input.Operations)
		out = append(out, *f)
	}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(stateRank(a.State), stateRank(b.State)), cmp.Compare(b.Severity, a.Severity),
			cmp.Compare(a.Detector, b.Detector), cmp.Compare(a.Place(), b.Place()))
	})
	return out, c
}

// stateRank puts what needs attention first: new, then persisting, then resolved.
func stateRank(s State) int {
	switch s {
	case New:
		return 0
	case Persisting:
		return 1
	}
	return 2
}

func perThousand(n, ops int) float64 {
	if ops == 0 {
		return 0
	}
	return math.Round(1e5*float64(n)/float64(ops)) / 100
}

func percent(f float64) string {
	return strconv.FormatFloat(100*f, 'f', -1, 64) + "%"
}

// verdict is the one line: the dependency that moved most, what still multiplies there, and the
// findings' balance.
func verdict(r *Report, opt Options) string {
	word := "unchanged"
	switch {
	case r.Worse:
		word = "worse"
	case r.Counts.Resolved > 0 && r.Counts.New == 0, improved(r, opt):
		word = "better"
	}
	var parts []string
	if len(r.Dependencies) > 0 {
		d := &r.Dependencies[0]
		for i := range r.Dependencies {
			if r.Dependencies[i].Worse {
				d = &r.Dependencies[i] // a regression is the headline, whatever else moved more
				break
			}
		}
		switch {
		case d.Before != nil && d.After != nil:
			s := fmt.Sprintf("%s: %.2fx -> %.2fx", d.Name(), d.Before.Amplification, d.After.Amplification)
			if still := stillRetrying(d.After); still != "" {
				s += ", " + still
			}
			parts = append(parts, s)
		case d.After != nil:
			parts = append(parts, fmt.Sprintf("%s: new, %.2fx", d.Name(), d.After.Amplification))
		default:
			parts = append(parts, fmt.Sprintf("%s: %.2fx -> no calls", d.Name(), d.Before.Amplification))
		}
	}
	parts = append(parts, fmt.Sprintf("findings: %d resolved, %d new, %d persisting", r.Counts.Resolved, r.Counts.New, r.Counts.Persisting))
	return word + ": " + strings.Join(parts, "; ")
}

// improved says whether some dependency's amplification fell by more than the tolerance.
func improved(r *Report, opt Options) bool {
	for _, d := range r.Dependencies {
		if d.Before != nil && d.After != nil && d.After.Amplification < d.Before.Amplification*(1-opt.Tolerance)-1e-9 {
			return true
		}
	}
	return false
}

// stillRetrying names the layers below the top one that still retry in a multiplying chain: the
// top layer is the natural retry owner, the others are what is left to fix. Those the finding did
// not list (a chain of more than 64) are counted where they fall, between its two halves.
func stillRetrying(f *Figures) string {
	layers := f.Layers
	if len(layers) < 2 {
		return ""
	}
	var ss []string
	for i, l := range layers {
		if i == len(layers)/2 && f.LayersNotListed > 0 {
			ss = append(ss, fmt.Sprintf("%d more layers still retry", f.LayersNotListed))
		}
		if i > 0 {
			ss = append(ss, fmt.Sprintf("%s still retries x%d", l.Service, l.Attempts))
		}
	}
	return strings.Join(ss, ", ")
}
