package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/analyzer/alerts"
	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

func newPolicyCmd(io streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Write or validate a retry policy file, or turn it into Prometheus alerts (docs/policy.md)",
		Long: `A policy file declares, per class of logical operation, who owns the retry loop, which
outcomes may be retried, maxAttempts, deadline, backoff, maxFanout, retryBudget, fallback,
terminal action and idempotency. 'stormwatch analyze --policy FILE' reports every trace that
breaks it; 'stormwatch policy alerts --policy FILE' turns it into Prometheus alerting rules.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPolicyInitCmd(io), newPolicyCheckCmd(io), newPolicyAlertsCmd(io))
	return cmd
}

func newPolicyInitCmd(io streams) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init [FILE]",
		Short: "Write a commented example policy to FILE (default: standard output)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || args[0] == "-" {
				_, err := io.out.Write(policy.Example)
				return err
			}
			file := args[0]
			flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			if !force {
				// O_EXCL makes "refuse to overwrite" atomic: no window between a check and the write.
				flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
			}
			f, err := os.OpenFile(file, flags, 0o644)
			if errors.Is(err, fs.ErrExist) {
				return withExitCode(2, fmt.Errorf("policy init: %s already exists (use --force to overwrite)", file))
			}
			if err != nil {
				return withExitCode(2, fmt.Errorf("policy init: %w", err))
			}
			if _, err := f.Write(policy.Example); err != nil {
				f.Close()
				return withExitCode(2, fmt.Errorf("policy init: write %s: %w", file, err))
			}
			if err := f.Close(); err != nil {
				return withExitCode(2, fmt.Errorf("policy init: write %s: %w", file, err))
			}
			_, err = fmt.Fprintf(io.err, "wrote %s; check it with: stormwatch policy check %s\n", file, file)
			return err
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite FILE if it exists")
	return cmd
}

func newPolicyCheckCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE...",
		Short: "Validate policy files: exit 0 when valid, 2 with every problem (file:line:col) when not",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			for _, file := range args {
				p, err := policy.Load(file, suite.Default())
				if err != nil {
					bad++
					fmt.Fprintln(io.err, err)
					continue
				}
				fmt.Fprintf(io.out, "%s: ok (%d classes, %d detector settings, %d what-if changes)\n",
					file, len(p.Classes), len(p.Detectors), len(p.WhatIf))
			}
			if bad > 0 {
				return withExitCode(2, fmt.Errorf("policy check: %d of %d files invalid", bad, len(args)))
			}
			return nil
		},
	}
}

func newPolicyAlertsCmd(io streams) *cobra.Command {
	var (
		file, output string
		o            = alerts.Options{Range: alerts.DefaultRange, For: alerts.DefaultFor}
	)
	cmd := &cobra.Command{
		Use:   "alerts [--policy FILE] [--output FILE]",
		Short: "Write Prometheus alerting rules over stormwatch's metrics from a policy (docs/alerts.md)",
		Long: `alerts writes a Prometheus rule file that pages on what the policy forbids, read from
stormwatch's own /metrics: amplification above a class's limit (maxAttempts x maxFanout) per
dependency and caller, work after a caller gave up, retry budgets exceeded, and a collector that
refuses or drops spans. Alerts carry severity, dependency and caller labels for routing, and
annotations that say what to look at and what to change.

Without --policy the built-in defaults apply (said in the file's header). A policy with mistakes
exits 2 with file:line:col for each, as 'policy check' does. Check the output with
'promtool check rules'; run the collector with the same --policy.`,
		Example: `  stormwatch policy alerts --policy policy.yaml > stormwatch-rules.yaml
  stormwatch policy alerts --policy policy.yaml --range 10m --for 5m --output /etc/prometheus/rules/stormwatch.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Range <= 0 {
				return withExitCode(2, fmt.Errorf("policy alerts: --range must be positive, got %s", o.Range))
			}
			if o.For < 0 {
				return withExitCode(2, fmt.Errorf("policy alerts: --for must not be negative, got %s", o.For))
			}
			p := policy.Default()
			o.Command = "stormwatch policy alerts"
			if file != "" {
				var err error
				if p, err = policy.Load(file, suite.Default()); err != nil {
					return withExitCode(2, err)
				}
				o.Command += " --policy " + file
			}
			if cmd.Flags().Changed("range") {
				o.Command += " --range " + o.Range.String()
			}
			if cmd.Flags().Changed("for") {
				o.Command += " --for " + o.For.String()
			}
			out, err := alerts.Rules(p, o)
			if err != nil {
				return withExitCode(2, fmt.Errorf("policy alerts: %w", err))
			}
			if output == "" || output == "-" {
				_, err = io.out.Write(out)
				return err
			}
			if err := os.WriteFile(output, out, 0o644); err != nil {
				return withExitCode(2, fmt.Errorf("policy alerts: --output: %w", err))
			}
			_, err = fmt.Fprintf(io.err, "wrote %s; check it with: promtool check rules %s\n", output, output)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&file, "policy", "", "retry policy `FILE` (docs/policy.md); without it, the built-in defaults")
	f.StringVarP(&output, "output", "o", "", "write the rules to `FILE` instead of standard output")
	f.DurationVar(&o.Range, "range", alerts.DefaultRange, "the `DURATION` each rate is taken over: how much traffic one evaluation judges")
	f.DurationVar(&o.For, "for", alerts.DefaultFor, "how long (`DURATION`) an amplification or a collector problem must last before its alert fires")
	return cmd
}
