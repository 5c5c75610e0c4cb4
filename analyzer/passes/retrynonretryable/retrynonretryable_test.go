package retrynonretryable_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrynonretryable"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, retrynonretryable.Detector, "testdata") }
