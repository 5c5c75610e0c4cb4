package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newAnalyzeCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:    "analyze",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("analyze: not built yet")
		},
	}
}
