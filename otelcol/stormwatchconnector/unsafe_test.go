package stormwatchconnector

import (
	"unsafe"

	"github.com/stormwatch/stormwatch/spans"
)

func unsafeStringData(s string) *byte { return unsafe.StringData(s) }

func canonical(k string) string {
	for _, w := range spans.WellKnown {
		if w == k {
			return w
		}
	}
	return ""
}
