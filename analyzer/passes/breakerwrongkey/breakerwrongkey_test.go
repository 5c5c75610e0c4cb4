package breakerwrongkey_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/breakerwrongkey"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, breakerwrongkey.Detector, "testdata") }
