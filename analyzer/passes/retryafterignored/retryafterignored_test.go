package retryafterignored_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retryafterignored"
)

func TestTestdata(t *testing.T) { passtest.Run(t, retryafterignored.Detector, "testdata") }
