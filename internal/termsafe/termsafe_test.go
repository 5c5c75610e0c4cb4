package termsafe

import (
	"bytes"
	"strings"
	"testing"
)

// The payloads an attacker puts in a span name, a service.name, a URL host or an error body.
var payloads = map[string]string{
	"osc-title":     "\x1b]0;pwned\x07",
	"osc-st":        "\x1b]2;pwned\x1b\\",
	"csi-clear":     "\x1b[2J\x1b[H",
	"alt-screen":    "\x1b[?1049l",
	"c1-csi":        "\u009b2J",
	"bidi-override": "admin\u202egnp.exe",
	"bidi-isolate":  "a\u2066b\u2069",
	"zero-width":    "pay\u200bpal",
	"bom":           "\ufeffx",
	"del-bs":        "ok\x7f\x08",
	"bad-utf8":      "a\xffb",
	"newline":       "line1\nline2",
}

func TestStringLeavesNothingATerminalObeys(t *testing.T) {
	for name, p := range payloads {
		got := String("svc-" + p)
		if needs(got, false) >= 0 || strings.ContainsRune(got, 0x1b) {
			t.Errorf("%s: %q still carries a control", name, got)
		}
		if got == "svc-"+p {
			t.Errorf("%s: unchanged", name)
		}
	}
	if got := String("\x1b]0;x\x07"); got != `\x1b]0;x\x07` {
		t.Errorf("OSC shown as %q", got)
	}
	if got := String("a\u202eb"); got != `a\u202eb` {
		t.Errorf("bidi override shown as %q", got)
	}
	if s := "plain ✓ é 日本"; String(s) != s {
		t.Errorf("printable text changed: %q", String(s))
	}
}

func TestWriterKeepsLayoutAndEscapesTheRest(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	// A rune cut across two writes stays whole.
	w.Write([]byte("a\tb\n\x1b[2J é"[:len("a\tb\n\x1b[2J é")-1]))
	w.Write([]byte("\xa9\n"))
	w.Flush()
	if got, want := b.String(), "a\tb\n\\x1b[2J é\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestFrameKeepsStylesOnly(t *testing.T) {
	in := "\x1b[1;38;5;2mtitle\x1b[0m\n" + "name \x1b]0;pwned\x07 \x1b[?1049l \u202e\n"
	got := Frame(in)
	if !strings.HasPrefix(got, "\x1b[1;38;5;2mtitle\x1b[0m\n") {
		t.Errorf("styles lost: %q", got)
	}
	if strings.Contains(got, "\x1b]") || strings.Contains(got, "\x1b[?") || strings.ContainsRune(got, 0x202e) {
		t.Errorf("data sequences kept: %q", got)
	}
	if s := "\x1b[31mred\x1b[0m\nplain"; Frame(s) != s {
		t.Errorf("a safe frame changed: %q", Frame(s))
	}
}
