package unboundedfanout_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/unboundedfanout"
)

func TestTestdata(t *testing.T) { passtest.Run(t, unboundedfanout.Detector, "testdata") }
