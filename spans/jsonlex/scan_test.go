package jsonlex

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Skip is how both OTLP/JSON readers step over fields they do not know: it must validate what it
// skips, stop at the nesting bound with the caller's error, and in strict mode refuse what
// protojson refuses.
func TestScannerSkip(t *testing.T) {
	tooDeep := errors.New("too deep")
	skip := func(in string, strict bool) error {
		s := Scanner{Buf: []byte(in), MaxDepth: 3, TooDeep: tooDeep, Strict: strict}
		if err := s.Skip(0); err != nil {
			return err
		}
		if s.Space(); s.Pos != len(s.Buf) {
			t.Fatalf("%s: stopped at %d", in, s.Pos)
		}
		return nil
	}
	for _, in := range []string{`{"a":[1,-2.5e3,"x\n",true,false,null,{}]}`, `[[["\ud83d\ude00"]]]`, ` "\ud800" `} {
		if err := skip(in, false); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	for _, in := range []string{`{"a":1,}`, `[1 2]`, `"a`, "\"\x01\"", `tru`, `-`, `{"a"}`} {
		if err := skip(in, false); err == nil || !strings.Contains(err.Error(), "at offset") {
			t.Errorf("%s: err = %v, want a positioned error", in, err)
		}
	}
	if err := skip(`[[[[1]]]]`, false); !errors.Is(err, tooDeep) {
		t.Errorf("four levels past a bound of three: err = %v", err)
	}
	if err := skip(`{"k":"\ud800"}`, true); err == nil {
		t.Error("strict: a lone surrogate was skipped")
	}
	if err := skip(`{"\udc00":1}`, true); err == nil {
		t.Error("strict: a lone surrogate in a name was skipped")
	}
}

// With Numbers, Skip takes a number exactly when encoding/json would: a reader that falls back to
// encoding/json on what it cannot read must not accept a document encoding/json refuses.
func TestScannerNumbersAsEncodingJSON(t *testing.T) {
	for _, in := range []string{"0", "-0", "12", "-12", "1.5", "0.5e3", "1E+2", "1e-2", "01", "-01", "00", "1.", ".5", "1.e2",
		"1e", "1e+", "--1", "1-2", "1.2.3", "1e2e3", "+1", "1ee2", "0x1", "-", "9223372036854775808"} {
		s := Scanner{Buf: []byte("[" + in + "]"), MaxDepth: 2, Numbers: true}
		err := s.Skip(0)
		if want := json.Valid(s.Buf); (err == nil) != want {
			t.Errorf("%s: Skip err = %v, encoding/json valid = %v", in, err, want)
		}
		if want := json.Valid([]byte(in)); ValidNumber([]byte(in)) != want {
			t.Errorf("ValidNumber(%s) = %v, want %v", in, !want, want)
		}
	}
}
