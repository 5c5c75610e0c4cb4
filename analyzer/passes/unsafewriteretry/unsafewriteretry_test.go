package unsafewriteretry_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/unsafewriteretry"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, unsafewriteretry.Detector, "testdata") }
