package hedgenotcancelled_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/hedgenotcancelled"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, hedgenotcancelled.Detector, "testdata") }
