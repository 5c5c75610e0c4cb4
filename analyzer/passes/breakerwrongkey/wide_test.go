package breakerwrongkey_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormwatch/stormwatch/analyzer/passes/breakerwrongkey"
	"github.com/stormwatch/stormwatch/analyzer/passes/detectortest"
)

// A caller whose one breaker opened on n origins' failures and then refused n other, healthy
// origins: each refused origin is a finding, and each lists the earliest 16 failed origins and
// counts the rest, so the report grows with n, not with n x n.
func TestManyFailedOriginsAreCountedNotListed(t *testing.T) {
	const n = 40
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "trace f%d\n", i)
		fmt.Fprintf(&b, "orders server \"GET /order\" %dms+5ms http.request.method=GET http.route=/order url.path=/order server.address=orders server.port=8080 http.response.status_code=200\n", i*10)
		fmt.Fprintf(&b, "  orders client \"HTTP GET\" %dms+3ms error http.request.method=GET url.full=http://failed%02d:8080/x server.address=failed%02d server.port=8080 http.response.status_code=503 error.type=\"503\"\n\n", i*10+1, i, i)
	}
	for i := range n {
		at := 1000 + i*10
		fmt.Fprintf(&b, "trace r%d\n", i)
		fmt.Fprintf(&b, "orders server \"GET /order\" %dms+5ms http.request.method=GET http.route=/order url.path=/order server.address=orders server.port=8080 http.response.status_code=200\n", at)
		fmt.Fprintf(&b, "  orders client \"HTTP GET\" %dms+100µs error http.request.method=GET url.full=http://healthy%02d:8080/x server.address=healthy%02d server.port=8080 error.type=\"circuit breaker is open\" message=\"circuit breaker is open\"\n\n", at+1, i, i)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "many.trace"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cases, err := detectortest.Cases(dir)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := cases[0].Analyze(breakerwrongkey.Detector)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != n {
		t.Fatalf("%d findings, want one for each of the %d refused origins", len(fs), n)
	}
	for _, f := range fs {
		failed, ok := f.Evidence["failed_origins"].Record()
		if !ok {
			t.Fatalf("%s: failed_origins is not a record", f.Summary)
		}
		if len(failed) != 16 {
			t.Errorf("%s: %d failed origins listed, want the 16 earliest", f.Summary, len(failed))
		}
		for i := range 16 {
			if _, ok := failed[fmt.Sprintf("http://failed%02d:8080", i)]; !ok {
				t.Errorf("%s: the early failure http://failed%02d:8080 is not listed: %v", f.Summary, i, failed)
			}
		}
		if got, _ := f.Evidence["failed_origins_not_listed"].Int(); got != n-16 {
			t.Errorf("%s: failed_origins_not_listed = %d, want %d", f.Summary, got, n-16)
		}
		if !strings.Contains(f.Summary, "24 more origins") {
			t.Errorf("summary does not count the unlisted origins: %s", f.Summary)
		}
	}
}
