package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// newLiveCmd is the root command: with no subcommand, stormwatch runs the collector and the live TUI.
func newLiveCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:   "stormwatch",
		Short: "Find retry storms: an OTLP collector, analyzer and live dashboard",
		Long: `stormwatch receives OpenTelemetry traces (OTLP gRPC :4317, HTTP :4318), rebuilds logical
operations from attempt spans, and shows which dependency is being hammered, by how much and by whom.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("the live dashboard is not built yet: run 'stormwatch collect'")
		},
	}
}
