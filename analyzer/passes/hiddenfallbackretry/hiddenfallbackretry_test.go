package hiddenfallbackretry_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/hiddenfallbackretry"
	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

func TestTestdata(t *testing.T) { passtest.Run(t, hiddenfallbackretry.Detector, "testdata") }
