package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newReplayCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:    "replay",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("replay: not built yet")
		},
	}
}
