package postdeadline_test

import (
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/passtest"
	"github.com/stormwatch/stormwatch/analyzer/passes/postdeadline"
)

func TestTestdata(t *testing.T) { passtest.Run(t, postdeadline.Detector, "testdata") }
