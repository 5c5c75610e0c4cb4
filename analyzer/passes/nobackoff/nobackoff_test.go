package nobackoff_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/nobackoff"
	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

func TestTestdata(t *testing.T) { passtest.Run(t, nobackoff.Detector, "testdata") }
