package retrybudgetexceeded_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrybudgetexceeded"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, retrybudgetexceeded.Detector, "testdata") }
