package suite

import (
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer"
)

func TestDefaultSuiteIsValid(t *testing.T) {
	if err := analyzer.Validate(Default()); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRejectsBadSuites(t *testing.T) {
	run := func(*analyzer.Pass) error { return nil }
	good := &analyzer.Detector{Name: "x-y", Title: "t", Doc: "a doc long enough to count", Run: run}
	cases := map[string]struct {
		ds   []*analyzer.Detector
		want string
	}{
		"nil":       {[]*analyzer.Detector{nil}, "is nil"},
		"bad name":  {[]*analyzer.Detector{{Name: "Retry_Amp", Title: "t", Doc: good.Doc, Run: run}}, "invalid name"},
		"duplicate": {[]*analyzer.Detector{good, good}, "listed twice"},
		"no title":  {[]*analyzer.Detector{{Name: "a", Doc: good.Doc, Run: run}}, "no title"},
		"no doc":    {[]*analyzer.Detector{{Name: "a", Title: "t", Run: run}}, "no doc"},
		"no run":    {[]*analyzer.Detector{{Name: "a", Title: "t", Doc: good.Doc}}, "no Run"},
		"settings not a struct pointer": {[]*analyzer.Detector{{Name: "a", Title: "t", Doc: good.Doc, Run: run,
			Settings: struct{ N int }{}}}, "must be a non-nil pointer to a struct"},
		"setting without doc": {[]*analyzer.Detector{{Name: "a", Title: "t", Doc: good.Doc, Run: run,
			Settings: &struct {
				N int `policy:"n"`
			}{}}}, "no doc tag"},
		"default out of bounds": {[]*analyzer.Detector{{Name: "a", Title: "t", Doc: good.Doc, Run: run,
			Settings: &struct {
				N int `policy:"n" doc:"d" min:"1"`
			}{}}}, "the default 0 must be at least 1"},
		"carried attribute empty": {[]*analyzer.Detector{{Name: "a", Title: "t", Doc: good.Doc, Run: run,
			CarriedAttrs: []string{""}}}, `carried attribute "" is empty or declared twice`},
		"carried attribute twice": {[]*analyzer.Detector{{Name: "a", Title: "t", Doc: good.Doc, Run: run,
			CarriedAttrs: []string{"retry.after", "x", "retry.after"}}}, `carried attribute "retry.after" is empty or declared twice`},
	}
	for name, c := range cases {
		err := analyzer.Validate(c.ds)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error containing %q", name, err, c.want)
		}
	}
}

func TestByName(t *testing.T) {
	for _, d := range Default() {
		if got, ok := ByName(d.Name); !ok || got != d {
			t.Errorf("ByName(%q) = %v, %v", d.Name, got, ok)
		}
	}
	if _, ok := ByName("nope"); ok {
		t.Error("ByName found a detector that does not exist")
	}
}
