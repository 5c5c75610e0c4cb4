package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newLabCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:    "lab",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("lab: not built yet")
		},
	}
}
