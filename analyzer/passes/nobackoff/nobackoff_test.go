package nobackoff_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/nobackoff"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, nobackoff.Detector, "testdata") }
