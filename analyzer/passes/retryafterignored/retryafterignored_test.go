package retryafterignored_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryafterignored"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, retryafterignored.Detector, "testdata") }
