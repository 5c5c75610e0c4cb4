package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/stormwatch/stormwatch/analyzer/policy"
	"github.com/stormwatch/stormwatch/analyzer/suite"
)

func newPolicyCmd(io streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Write or validate a retry policy file (docs/policy.md)",
		Long: `A policy file declares, per class of logical operation, who owns the retry loop, which
outcomes may be retried, maxAttempts, deadline, backoff, maxFanout, retryBudget, fallback,
terminal action and idempotency. 'stormwatch analyze --policy FILE' reports every trace that
breaks it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPolicyInitCmd(io), newPolicyCheckCmd(io))
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
