package breakerwrongkey_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/breakerwrongkey"
	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

func TestTestdata(t *testing.T) { passtest.Run(t, breakerwrongkey.Detector, "testdata") }
