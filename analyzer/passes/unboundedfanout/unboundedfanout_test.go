package unboundedfanout_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedfanout"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, unboundedfanout.Detector, "testdata") }
