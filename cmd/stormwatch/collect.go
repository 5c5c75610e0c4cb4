package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newCollectCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:    "collect",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("collect: not built yet")
		},
	}
}
