package policy

import (
	"fmt"
	"path"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
)

// Pos is where a value is written in a policy file. The zero Pos means "built-in default".
type Pos struct {
	File string
	Line int
	Col  int
}

// IsZero reports whether the value came from stormwatch's built-in defaults, not from a file.
func (p Pos) IsZero() bool { return p.Line == 0 }

// String is file:line:col, or "built-in default".
func (p Pos) String() string {
	if p.IsZero() {
		return "built-in default"
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// FileLine is file:line, the short form findings quote.
func (p Pos) FileLine() string {
	if p.IsZero() {
		return "built-in default"
	}
	return fmt.Sprintf("%s:%d", p.File, p.Line)
}

// Setting is one policy value with where it was written. Set is false when neither the class nor
// the defaults gave it; Value is then the built-in default (or the zero value where there is none).
type Setting[T any] struct {
	Value T
	Set   bool
	Pos   Pos
}

// Jitter kinds. A number between 0 and 1 is also accepted: a proportional jitter (0.2 = +-20%).
const (
	JitterNone         = "none"
	JitterFull         = "full"
	JitterEqual        = "equal"
	JitterDecorrelated = "decorrelated"
)

// Backoff is the pause between attempts: base*2^n capped at Cap, randomised by Jitter.
type Backoff struct {
	Base time.Duration
	Cap  time.Duration
	// Jitter is one of the Jitter* kinds, or "" when JitterRatio is used.
	Jitter string
	// JitterRatio is a proportional jitter in [0,1] when Jitter is "".
	JitterRatio float64
}

// Rules are the fields of the checklist of docs/principles.md#intents-and-attempts for one class of
// operation.
type Rules struct {
	// Owner is the service that may retry; attempts looped by another layer break the rule.
	Owner Setting[string]
	// Retryable lists the outcomes a retry may follow (see [Outcomes]).
	Retryable Setting[Outcomes]
	// MaxAttempts counts the first attempt: 1 means no retries.
	MaxAttempts Setting[int]
	// Deadline is the whole operation's budget: every attempt and pause fits in it.
	Deadline    Setting[time.Duration]
	Backoff     Setting[Backoff]
	MaxFanout   Setting[int]
	RetryBudget Setting[float64]
	// Fallback names the fallback branch, when there is one.
	Fallback Setting[string]
	// Terminal is what ends an exhausted operation: fail-fast, shed, fallback or fallback:<name>.
	Terminal Setting[string]
	// Idempotent says the operation may be repeated safely; writes without it must not retry.
	Idempotent Setting[bool]
}

// Match selects the operations a class governs. Every field given must match; a field may be a
// path.Match pattern ("catalog.*"). An empty Match matches nothing (only defaults match everything).
type Match struct {
	// Operation is resilience.operation.name.
	Operation string
	// Service is the calling service.
	Service string
	// Dependency is the dependency's name (its service.name, peer.service, host...), the
	// callee's service.name, or the address of its calls (scheme://host:port).
	Dependency string
	// Route is the route of the caller's server span (http.route) or the RPC method.
	Route string
}

// Class is one named class of operations with its rules, already merged with the defaults.
type Class struct {
	Name  string
	Pos   Pos
	Match Match
	Rules
}

// Key describes one logical operation for class lookup.
type Key struct {
	Operation  string
	Service    string
	Dependency string
	// DependencyService is the callee's service.name when known; Origin the scheme://host:port
	// of the operation's first call. Match.Dependency may name any of the three.
	DependencyService string
	Origin            string
	Route             string
}

// DetectorSettings are what a policy file writes under detectors.<name>.
type DetectorSettings struct {
	// Enabled is false when the policy turned the detector off.
	Enabled  bool
	Severity Setting[analyzer.Severity]
	// Values are the detector's own settings as the file leaves them: a copy of its declared
	// defaults (of the same type as its analyzer.Detector.Settings) with the keys the file writes
	// set. nil when the detector declares none.
	Values any
	// Set holds, by policy key, where each of the detector's settings the file writes is written;
	// Configure copies those (and only those) into the detector it runs.
	Set map[string]Pos
	Pos Pos
}

// Policy is a loaded, validated policy file.
type Policy struct {
	// File is the path it was read from, as given.
	File string
	// Defaults apply to every operation; classes override them field by field.
	Defaults Class
	Classes  []Class
	// Window is the span of time the cross-trace detectors look at in live mode (offline they see
	// the whole input).
	Window Setting[time.Duration]
	// Detectors holds the settings of every detector the file names; absent ones are enabled with
	// their defaults.
	Detectors map[string]DetectorSettings
	// WhatIf lists policy changes to simulate (the same as analyze --what-if).
	WhatIf []Change
}

// Built-in defaults: the numbers of docs/principles.md (each detector's in docs/detectors.md).
const (
	DefaultMaxAttempts = 5
	DefaultMaxFanout   = 1
	DefaultRetryBudget = 0.1
	DefaultWindow      = time.Minute
)

// Default is the policy in force when no file is given: the defaults of docs/principles.md, every
// detector on.
func Default() *Policy {
	p := &Policy{Detectors: map[string]DetectorSettings{}}
	p.Defaults = Class{Name: "defaults"}
	p.Defaults.Rules = builtinRules()
	p.Window = Setting[time.Duration]{Value: DefaultWindow}
	return p
}

func builtinRules() Rules {
	var r Rules
	r.MaxAttempts.Value = DefaultMaxAttempts
	r.MaxFanout.Value = DefaultMaxFanout
	r.RetryBudget.Value = DefaultRetryBudget
	r.Retryable.Value = DefaultRetryable()
	return r
}

// Lookup returns the first class, in file order, that matches k, or the defaults. It never returns
// nil, so detectors can read rules without a nil check.
func (p *Policy) Lookup(k Key) *Class {
	if p == nil {
		d := Default()
		return &d.Defaults
	}
	for i := range p.Classes {
		if p.Classes[i].Match.matches(k) {
			return &p.Classes[i]
		}
	}
	return &p.Defaults
}

// Detector returns what the file writes for the named detector; a detector the file does not
// name is enabled with its own defaults (Values nil).
func (p *Policy) Detector(name string) DetectorSettings {
	if p != nil {
		if d, ok := p.Detectors[name]; ok {
			return d
		}
	}
	return DetectorSettings{Enabled: true}
}

// Enabled reports whether the named detector runs under this policy.
func (p *Policy) Enabled(name string) bool { return p.Detector(name).Enabled }

func (m Match) matches(k Key) bool {
	if m == (Match{}) {
		return false
	}
	if !glob(m.Operation, k.Operation) || !glob(m.Service, k.Service) || !glob(m.Route, k.Route) {
		return false
	}
	if m.Dependency != "" && !glob(m.Dependency, k.Dependency) && !glob(m.Dependency, k.DependencyService) &&
		!glob(m.Dependency, k.Origin) {
		return false
	}
	return true
}

// glob matches an optional pattern: "" matches anything, a pattern that path.Match rejects was
// refused at load time.
func glob(pattern, s string) bool {
	if pattern == "" {
		return true
	}
	if pattern == s {
		return true
	}
	if s == "" {
		return false
	}
	ok, _ := path.Match(pattern, s)
	return ok
}

// merge fills the fields r leaves unset from d.
func (r *Rules) merge(d Rules) {
	mergeSetting(&r.Owner, d.Owner)
	mergeSetting(&r.Retryable, d.Retryable)
	mergeSetting(&r.MaxAttempts, d.MaxAttempts)
	mergeSetting(&r.Deadline, d.Deadline)
	mergeSetting(&r.Backoff, d.Backoff)
	mergeSetting(&r.MaxFanout, d.MaxFanout)
	mergeSetting(&r.RetryBudget, d.RetryBudget)
	mergeSetting(&r.Fallback, d.Fallback)
	mergeSetting(&r.Terminal, d.Terminal)
	mergeSetting(&r.Idempotent, d.Idempotent)
}

func mergeSetting[T any](s *Setting[T], d Setting[T]) {
	if !s.Set {
		*s = d
	}
}
