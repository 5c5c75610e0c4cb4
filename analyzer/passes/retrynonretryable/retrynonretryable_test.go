package retrynonretryable_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/retrynonretryable"
)

func TestTestdata(t *testing.T) { passtest.Run(t, retrynonretryable.Detector, "testdata") }
