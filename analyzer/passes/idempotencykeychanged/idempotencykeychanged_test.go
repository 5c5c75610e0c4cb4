package idempotencykeychanged_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/idempotencykeychanged"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, idempotencykeychanged.Detector, "testdata") }
