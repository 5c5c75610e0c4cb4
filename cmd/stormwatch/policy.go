package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newPolicyCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:    "policy",
		Short:  "(not built yet)",
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return errors.New("policy: not built yet")
		},
	}
}
