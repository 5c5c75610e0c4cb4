package policy

import _ "embed"

// Example is the commented policy that `stormwatch policy init` writes. It parses cleanly (a test
// says so), so users start from a file that works.
//
//go:embed example.yaml
var Example []byte
