package hedgenotcancelled_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/hedgenotcancelled"
	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

func TestTestdata(t *testing.T) { passtest.Run(t, hedgenotcancelled.Detector, "testdata") }
