package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// One value name per kind of flag value, across every command: a duration reads DURATION, a file
// FILE, an address to listen on ADDR, a URL URL; and a flag of one name reads the same wherever it
// appears, so --policy FILE in one command's help is --policy FILE in the next.
func TestFlagValueNamesAgree(t *testing.T) {
	root := newRootCmd(strings.NewReader(""), io.Discard, io.Discard)
	fileFlags := map[string]bool{"policy": true, "record": true, "report": true, "log-file": true, "tls-cert": true,
		"tls-key": true, "output": true}
	byFlag := map[string]string{}
	where := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			want := ""
			switch {
			case f.Value.Type() == "duration":
				want = "DURATION"
			case fileFlags[f.Name] || strings.HasSuffix(f.Name, "-file"):
				want = "FILE"
			case f.Name == "grpc" || f.Name == "http":
				want = "ADDR"
			case f.Name == "jaeger":
				want = "URL"
			case f.Name == "to" || f.Name == "otlp":
				want = "ENDPOINT"
			}
			if want != "" && name != want {
				t.Errorf("%s --%s reads %q, want %s", c.CommandPath(), f.Name, name, want)
			}
			if f.Value.Type() == "string" && name == "string" {
				t.Errorf("%s --%s has no value name (reads \"string\"): put one in backquotes in its usage", c.CommandPath(), f.Name)
			}
			if prev, ok := byFlag[f.Name]; ok && prev != name {
				t.Errorf("--%s reads %q in %s but %q in %s", f.Name, name, c.CommandPath(), prev, where[f.Name])
			}
			byFlag[f.Name], where[f.Name] = name, c.CommandPath()
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(byFlag) < 40 {
		t.Fatalf("walked %d flag names: the command tree was not read", len(byFlag))
	}
}
