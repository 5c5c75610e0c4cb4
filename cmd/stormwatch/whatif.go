package main

import (
	"fmt"
	"io"
	"time"

	"github.com/stormwatch/stormwatch/analyzer"
	"github.com/stormwatch/stormwatch/analyzer/engine"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/render"
	"github.com/stormwatch/stormwatch/analyzer/whatif"
)

// whatIfChanges are the what-if changes of a run: --what-if's, else the policy file's whatIf.
func whatIfChanges(flag string, p *policy.Policy) ([]policy.Change, error) {
	if flag != "" {
		cs, err := policy.ParseChanges(flag)
		if err != nil {
			return nil, fmt.Errorf("--what-if: %w", err)
		}
		return cs, nil
	}
	if p != nil {
		return p.WhatIf, nil
	}
	return nil, nil
}

// writeAnalysis renders the report and, when changes are asked for, the recorded vs predicted
// physical calls per dependency under them (analyzer/whatif).
func writeAnalysis(w io.Writer, f render.Format, rep *analyzer.Report, a *engine.Engine, changes []policy.Change) error {
	if len(changes) == 0 {
		return render.Write(w, f, rep)
	}
	// The snapshot's time only stamps it; offline nothing in it depends on the clock.
	ops := a.Snapshot(time.Unix(0, 0)).Operations()
	if err := whatif.CheckLayers(ops, changes); err != nil {
		return fmt.Errorf("what-if: %w", err)
	}
	pred := whatif.Predict(ops, changes)
	return render.WriteWithWhatIf(w, f, rep, &pred)
}
