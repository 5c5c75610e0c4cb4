package collector

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestWithHTTPHandler: extra routes are served on the OTLP/HTTP port; a protected one wants the
// bearer token when one is configured, an open one does not, and neither disturbs /v1/traces.
func TestWithHTTPHandler(t *testing.T) {
	hello := func(msg string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, msg) })
	}
	for _, tc := range []struct {
		name, token, path, auth string
		wantCode                int
		wantBody                string
	}{
		{"protected, no token configured", "", "/secret", "", http.StatusOK, "secret"},
		{"protected, token missing", "tok", "/secret", "", http.StatusUnauthorized, "missing bearer token"},
		{"protected, wrong token", "tok", "/secret", "Bearer nope", http.StatusUnauthorized, "wrong bearer token"},
		{"protected, right token", "tok", "/secret", "Bearer tok", http.StatusOK, "secret"},
		{"open route ignores the token", "tok", "/open", "", http.StatusOK, "open"},
		{"other paths are still 404", "tok", "/nothing", "Bearer tok", http.StatusNotFound, "/nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, Config{Token: tc.token}, &sink{},
				WithHTTPHandler("/secret", hello("secret"), true), WithHTTPHandler("/open", hello("open"), false))
			req, _ := http.NewRequest(http.MethodGet, "http://"+c.HTTPAddr()+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(b), tc.wantBody) {
				t.Errorf("%d %q, want %d with %q", resp.StatusCode, b, tc.wantCode, tc.wantBody)
			}
			if resp.StatusCode == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
}
