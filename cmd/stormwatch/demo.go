package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDemoCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:    "demo",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("demo: not built yet")
		},
	}
}
