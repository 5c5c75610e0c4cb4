package retrybudgetexceeded_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrybudgetexceeded"
)

func TestTestdata(t *testing.T) { passtest.Run(t, retrybudgetexceeded.Detector, "testdata") }
