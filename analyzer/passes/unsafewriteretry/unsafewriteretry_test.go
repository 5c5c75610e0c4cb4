package unsafewriteretry_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/unsafewriteretry"
)

func TestTestdata(t *testing.T) { passtest.Run(t, unsafewriteretry.Detector, "testdata") }
