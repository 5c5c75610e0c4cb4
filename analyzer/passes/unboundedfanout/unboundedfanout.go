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
	Settings: &Settings{MaxFanout: 1},
	Run:      run,
}

// Settings are unbounded-fanout's own (analyzer.Detector.Settings).
type Settings struct {
	// MaxFanout is the limit of an operation whose policy class sets no maxFanout: one origin per
	// attempt, since a retry sent to several replicas at once multiplies load as retries do.
	MaxFanout int `policy:"maxFanout" doc:"origins one attempt may reach when the operation's policy class sets no maxFanout" min:"1"`
}

func run(pass *analyzer.Pass) error {
	for _, op := range pass.Operations {
		// The limit is at least 1: an operation none of whose attempts reached two origins
		// cannot exceed it, and its limit (a policy lookup) is not needed.
		if !fansOut(op) {
			continue
		}
		// The class's maxFanout when the policy sets one, else the detector's own.
		cls := audit.Class(audit.Policy(pass.RunSettings), op)
		limit := analyzer.SettingsOf[Settings](pass).MaxFanout
		if cls.MaxFanout.Set {
			limit = cls.MaxFanout.Value
		}
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
			ev := analyzer.Evidence{
				"fanout":  analyzer.Int(len(a.Origins)),
				"limit":   analyzer.Int(limit),
				"targets": analyzer.Texts(targets),
			}
			// A limit set by a policy file's class is cited with its line (rule, policy).
			cite := ""
			if cls.MaxFanout.Set {
				cite = audit.Cite(ev, "maxFanout", cls.MaxFanout, strconv.Itoa(limit))
			}
			pass.Report(analyzer.Finding{
				Severity:   pass.Detector.Severity,
				SpanIDs:    ids,
				Service:    op.Caller,
				Dependency: op.Dependency,
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
