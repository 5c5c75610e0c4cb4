package policyviolation

import (
	"fmt"
	"strings"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
	"github.com/stormwatch/stormwatch/analyzer/policy"
)

// Detector is the policy-violation detector.
var Detector = &analyzer.Detector{
	Name:     "policy-violation",
	Title:    "Operation broke its policy class",
	Doc:      "an operation broke a rule of its class in the policy file (owner, deadline, backoff, terminal, fallback); evidence: rule, policy (file:line), class, expected, observed",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

func run(pass *analyzer.Pass) error {
	p := audit.Policy(pass.RunSettings)
	classes := audit.ClassesIn(p, pass.Trace)
	if p.File == "" {
		return nil
	}
	skew := pass.RunSettings.Skew()
	for _, op := range pass.Operations {
		if len(op.Attempts) == 0 {
			continue
		}
		cls := classes.Of(op)
		v := violations{pass: pass, op: op, cls: cls}
		if audit.FromFile(cls.Owner) && op.Tries() > 1 && op.Owner != cls.Owner.Value {
			action := "remove the retry loop from " + op.Owner + ", or make " + op.Owner + " the owner and remove the others"
			if audit.NoRetries(cls) {
				// Making it the owner would not help: the class allows one attempt, whoever makes it.
				action = "remove the retry loop from " + op.Owner + ": the class allows one attempt (maxAttempts 1)"
			}
			v.report("owner", cls.Owner.Pos, cls.Owner.Value, op.Owner, audit.AttemptIDs(op, audit.IsRetry),
				fmt.Sprintf("%s retried %s (%d tries) but the policy makes %s the only owner of its retries", op.Owner, op.Name, op.Tries(), cls.Owner.Value),
				action)
		}
		if audit.FromFile(cls.Deadline) && op.Latency() > cls.Deadline.Value+time.Duration(skew) {
			v.report("deadline", cls.Deadline.Pos, cls.Deadline.Value.String(), op.Latency().Round(time.Millisecond).String(), audit.IDs(op.SpanID),
				fmt.Sprintf("%s's %s took %s, over its class's deadline of %s", op.Owner, op.Name, op.Latency().Round(time.Millisecond), cls.Deadline.Value),
				"bound the whole operation (every attempt and pause) by one deadline and stop retrying when it runs out")
		}
		if audit.FromFile(cls.Backoff) && !audit.NoRetries(cls) {
			// Where no retry is allowed, no pause is right: unbounded-retries reports the retry.
			checkBackoff(&v, skew)
		}
		last := &op.Attempts[len(op.Attempts)-1]
		if !op.Inferred && last.Outcome != analyzer.OutcomeOK && op.Terminal != "" && op.Terminal != "complete" {
			if audit.FromFile(cls.Terminal) && !terminalMatches(cls.Terminal.Value, op.Terminal) {
				v.report("terminal", cls.Terminal.Pos, cls.Terminal.Value, op.Terminal, audit.IDs(op.SpanID, last.SpanID),
					fmt.Sprintf("%s's %s ended with %s; its class's terminal action is %s", op.Owner, op.Name, op.Terminal, cls.Terminal.Value),
					"end exhausted operations of this class with the declared terminal action")
			}
			if name, ok := strings.CutPrefix(op.Terminal, "fallback:"); ok && audit.FromFile(cls.Fallback) && name != cls.Fallback.Value {
				v.report("fallback", cls.Fallback.Pos, cls.Fallback.Value, name, audit.IDs(op.SpanID, last.SpanID),
					fmt.Sprintf("%s's %s fell back to %s; its class's fallback is %s", op.Owner, op.Name, name, cls.Fallback.Value),
					"use the declared fallback, or declare this one in the policy")
			}
		}
	}
	return nil
}

type violations struct {
	pass *analyzer.Pass
	op   *analyzer.Operation
	cls  *policy.Class
}

func (v *violations) report(rule string, pos policy.Pos, expected, observed string, ids []string, summary, action string) {
	v.pass.Report(analyzer.Finding{
		Severity:   v.pass.Detector.Severity,
		SpanIDs:    ids,
		Service:    v.op.Owner,
		Dependency: v.op.Dependency,
		Summary:    fmt.Sprintf("%s (policy %s at %s, class %s)", summary, rule, pos.FileLine(), v.cls.Name),
		Action:     action,
		Evidence: analyzer.Evidence{
			"rule":     analyzer.Text(rule),
			"policy":   analyzer.Text(pos.FileLine()),
			"class":    analyzer.Text(v.cls.Name),
			"expected": analyzer.Text(expected),
			"observed": analyzer.Text(observed),
		},
	})
}

func terminalMatches(want, got string) bool {
	if want == "fallback" {
		return strings.HasPrefix(got, "fallback")
	}
	return want == got
}

// checkBackoff compares each retry's pause with what the class's backoff allows. Full and
// decorrelated jitter may draw any pause up to the cap, so only the cap is checked for them.
func checkBackoff(v *violations, skew int64) {
	b := v.cls.Backoff.Value
	n := 0
	for i := range v.op.Attempts {
		a := &v.op.Attempts[i]
		if !audit.IsRetry(a) {
			continue
		}
		n++
		sched := min(int64(b.Cap), int64(b.Base)<<min(n-1, 30))
		lo, hi := int64(0), int64(b.Cap)
		switch {
		case b.Jitter == policy.JitterNone:
			lo, hi = sched*9/10, sched*11/10
		case b.Jitter == policy.JitterEqual:
			lo, hi = sched/2*9/10, sched*11/10
		case b.Jitter == "":
			r := b.JitterRatio
			lo, hi = int64(float64(sched)*(1-r)*0.9), int64(float64(sched)*(1+r)*1.1)
		case b.Jitter == policy.JitterFull:
			hi = sched + sched/10
		}
		pause := a.BackoffNanos
		if pause < 0 {
			continue // not measured (attempts seen only on callees with their own clocks)
		}
		if pause+skew >= lo && pause <= hi+skew {
			continue
		}
		want := fmt.Sprintf("%s..%s", time.Duration(lo).Round(time.Millisecond), time.Duration(hi).Round(time.Millisecond))
		v.report("backoff", v.cls.Backoff.Pos, want, time.Duration(pause).Round(100*time.Microsecond).String(), audit.IDs(a.SpanID),
			fmt.Sprintf("%s paused %s before retry %d of %s; its class's backoff allows %s", v.op.Owner, time.Duration(pause).Round(100*time.Microsecond), n, v.op.Name, want),
			"implement the declared backoff: base*2^n capped, with the declared jitter")
		return
	}
}
