package idempotencykeychanged_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/idempotencykeychanged"
	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
)

func TestTestdata(t *testing.T) { passtest.Run(t, idempotencykeychanged.Detector, "testdata") }
