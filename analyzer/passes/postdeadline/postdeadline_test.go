package postdeadline_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/postdeadline"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, postdeadline.Detector, "testdata") }
