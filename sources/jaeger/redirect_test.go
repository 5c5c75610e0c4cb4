package jaeger

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// elsewhere is a server that counts the requests that reach it and whether any carried
// credentials: where a redirect points.
type elsewhere struct {
	*httptest.Server
	requests, withAuth atomic.Int32
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			e.withAuth.Add(1)
		}
		w.Write(oneTrace())
	}))
	t.Cleanup(e.Close)
	return e
}

// A Jaeger that redirects to another scheme (https to http), another port of the same host, or
// another host: with a token or a password configured, the redirect is refused with an error that
// says why, and nothing reaches the other place - Go's client alone keeps the Authorization
// header for the same host over http or on another port, and the run ended well with the token
// sent in clear.
func TestCredentialsNeverFollowARedirectElsewhere(t *testing.T) {
	target := newElsewhere(t)
	otherHost := strings.Replace(target.URL, "127.0.0.1", "localhost", 1)
	redirectTo := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to+r.URL.RequestURI(), http.StatusFound)
		}
	}
	tlsSrv := httptest.NewTLSServer(redirectTo(target.URL)) // https -> http, another port
	defer tlsSrv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	plain := httptest.NewServer(redirectTo(target.URL)) // another port of 127.0.0.1
	defer plain.Close()
	hostSrv := httptest.NewServer(redirectTo(otherHost)) // another host name
	defer hostSrv.Close()
	for _, origin := range []struct {
		name, url string
	}{{"https to http", tlsSrv.URL}, {"another port", plain.URL}, {"another host", hostSrv.URL}} {
		for _, auth := range []Config{{Token: "s3cret"}, {Username: "oncall", Password: "pw"}} {
			target.requests.Store(0)
			cfg := auth
			cfg.URL, cfg.API, cfg.TLS = origin.url, APIv1, &tls.Config{RootCAs: pool}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = c.FindTraces(context.Background(), window)
			if !errors.Is(err, ErrCrossOriginRedirect) {
				t.Errorf("%s: err = %v, want the redirect refused", origin.name, err)
			}
			if n := target.requests.Load(); n != 0 {
				t.Errorf("%s: %d requests reached the redirect's target", origin.name, n)
			}
			if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), ":pw@")) {
				t.Errorf("%s: the error shows the secret: %v", origin.name, err)
			}
		}
	}
	if target.withAuth.Load() != 0 {
		t.Errorf("credentials reached another place %d times", target.withAuth.Load())
	}
	// Without credentials a redirect is followed; within the origin it is followed with them.
	c, _ := New(Config{URL: plain.URL, API: APIv1})
	if _, _, err := c.FindTraces(context.Background(), window); err != nil {
		t.Errorf("no credentials, a redirect: %v", err)
	}
	var sawAuth atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("/old/", http.StripPrefix("/old", http.RedirectHandler("/new/api/traces", http.StatusMovedPermanently)))
	mux.HandleFunc("/new/api/traces", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer s3cret" {
			sawAuth.Add(1)
		}
		w.Write(oneTrace())
	})
	same := httptest.NewServer(mux)
	defer same.Close()
	c, _ = New(Config{URL: same.URL + "/old", API: APIv1, Token: "s3cret"})
	if _, _, err := c.FindTraces(context.Background(), window); err != nil || sawAuth.Load() != 1 {
		t.Errorf("a redirect within the origin: err %v, authorized requests %d", err, sawAuth.Load())
	}
}

// user:password in the Jaeger URL is sent as basic auth, and the URL the client shows - in
// notes, trace links and errors - never carries it.
func TestURLUserInfoIsBasicAuthAndNeverShown(t *testing.T) {
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "oncall" || p != "hunter2" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("storage down"))
			return
		}
		w.Write(oneTrace())
	}))
	defer srv.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://oncall:hunter2@", 1)
	c, err := New(Config{URL: withUser, API: APIv1})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.FindTraces(context.Background(), window); err != nil {
		t.Fatalf("basic auth from the URL: %v", err)
	}
	for _, shown := range []string{c.URL(), c.TraceURL("abc")} {
		if strings.Contains(shown, "hunter2") || strings.Contains(shown, "oncall") {
			t.Errorf("shown: %s", shown)
		}
	}
	fail.Store(true)
	_, _, err = c.FindTraces(context.Background(), window)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error: %v", err)
	}
	if _, err := New(Config{URL: "http://oncall:hunter2@jaeger:16686", Token: "t"}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a user in the URL and a token: %v", err)
	}
	if _, err := New(Config{URL: "ftp://oncall:hunter2@jaeger:16686"}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad URL's error: %v", err)
	}
}

// An answer of the OTLP query API that is not what the API answers says what was wrong with it:
// the JSON decoder's complaint, or that it held neither a result nor an error.
func TestUnexpectedAnswerSaysWhy(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"result": {"resourceSpans": [`, "not the API's JSON: unexpected end of JSON input"},
		{`<html>proxy login</html>`, "not the API's JSON: invalid character '<'"},
		{`{"something": "else"}`, "neither a result nor an error in it"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(c.body)) }))
		cl, _ := New(Config{URL: srv.URL, API: APIv3})
		_, _, err := cl.FindTraces(context.Background(), window)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "unexpected answer 200") {
			t.Errorf("%s: err = %v, want %q", c.body, err, c.want)
		}
	}
}
