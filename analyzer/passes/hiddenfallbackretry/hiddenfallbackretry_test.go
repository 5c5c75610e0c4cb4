package hiddenfallbackretry_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
	"github.com/stormwatch/stormwatch/analyzer/passes/hiddenfallbackretry"
)

func TestTestdata(t *testing.T) { detectortest.Run(t, hiddenfallbackretry.Detector, "testdata") }
