package unboundedfanout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/passes/internal/audit"
)

// Detector is the unbounded-fanout detector.
var Detector = &analyzer.Detector{
	Name:     "unbounded-fanout",
	Title:    "One attempt reached too many origins",
	Doc:      "an attempt of one logical operation reached more origins than the allowed fan-out (default 1, policy maxFanout); evidence: fanout, limit, targets",
	Severity: analyzer.SeverityWarning,
	Run:      run,
}

func run(pass *analyzer.Pass) error {
	for _, op := range pass.Operations {
		// The limit is at least 1: an operation none of whose attempts reached two origins
		// cannot exceed it, and its limit (a policy lookup) is not needed.
		if !fansOut(op) {
			continue
		}
		limit := pass.Settings.FanoutLimit(op)
		for i := range op.Attempts {
			a := &op.Attempts[i]
			if len(a.Origins) <= limit {
				continue
			}
			targets := slices.Clone(a.Origins)
			slices.Sort(targets)
			ids := make([]string, len(a.Calls))
			for i, id := range a.Calls {
				ids[i] = id.String()
			}
			dep := op.Dependency
			if op.DependencyService != "" {
				dep = op.DependencyService
			}
			ev := map[string]any{
				"fanout":  len(a.Origins),
				"limit":   limit,
				"targets": targets,
			}
			// A limit set by a policy file's class is cited with its line (rule, policy).
			cite := ""
			if cls := audit.Class(audit.Policy(pass.Settings), nil, op); cls.MaxFanout.Value == limit {
				cite = audit.Cite(ev, "maxFanout", cls.MaxFanout, strconv.Itoa(limit))
			}
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    ids,
				Service:    op.Caller,
				Dependency: a.Origins[0],
				Summary: fmt.Sprintf("attempt %d of %s's call to %s reached %d origins (allowed %d): %s%s",
					a.Number, op.Caller, dep, len(a.Origins), limit, strings.Join(targets, ", "), cite),
				Action:   "choose the replica before the attempt and send one copy: enforce an integer maxFanout per attempt in the client, and count every copy against the retry budget",
				Evidence: ev,
			})
		}
	}
	return nil
}

// fansOut reports whether an attempt of op reached more than one origin.
func fansOut(op *analyzer.Operation) bool {
	for i := range op.Attempts {
		if len(op.Attempts[i].Origins) > 1 {
			return true
		}
	}
	return false
}
