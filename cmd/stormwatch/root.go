package main

import (
	"io"

	"github.com/spf13/cobra"
)

// streams are the process's standard streams, passed to every subcommand so tests can capture them.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	io := streams{in: stdin, out: stdout, err: stderr}
	root := newLiveCmd(io)
	root.SilenceUsage = true
	root.SilenceErrors = true
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newCollectCmd(io),
		newAnalyzeCmd(io),
		newDiffCmd(io),
		newReplayCmd(io),
		newLabCmd(io),
		newDemoCmd(io),
		newPolicyCmd(io),
		newVersionCmd(io),
	)
	return root
}
