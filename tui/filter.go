package tui

import (
	"strings"
	"unicode/utf8"

	tea "github.com/charmbracelet/bubbletea"
)

// filter is what the user typed after `/`: space-separated terms that must all match. A term is a
// substring ("reviews") or key=value ("service=edge", "detector=retry-amplification",
// "http.response.status_code=503"). Both compare case-insensitively and by substring, so
// "dep=reviews" finds "http://reviews:8080".
type filter struct {
	raw   string
	terms []term
}

type term struct {
	key, val string // key is "" for a plain substring
}

func parseFilter(s string) filter {
	f := filter{raw: s}
	for _, w := range strings.Fields(s) {
		if i := strings.IndexByte(w, '='); i > 0 {
			f.terms = append(f.terms, term{key: canonicalKey(w[:i]), val: w[i+1:]})
		} else {
			f.terms = append(f.terms, term{val: w})
		}
	}
	return f
}

// canonicalKey folds the short spellings people type into the names the screens know.
func canonicalKey(k string) string {
	k = strings.ToLower(k)
	switch k {
	case "svc", "service.name":
		return "service"
	case "dep", "origin", "callee":
		return "dependency"
	case "det":
		return "detector"
	case "sev":
		return "severity"
	case "op", "operation":
		return "name"
	}
	return k
}

func (f filter) empty() bool { return len(f.terms) == 0 }

// matches reports whether every term holds. field answers a key=value term with the row's values
// for that key (ok false when the row has no such field); text lists what a plain substring may hit.
func (f filter) matches(text []string, field func(key string) ([]string, bool)) bool {
	for _, t := range f.terms {
		if t.key == "" {
			if !anyContains(text, t.val) {
				return false
			}
			continue
		}
		vals, ok := field(t.key)
		if !ok || !anyContains(vals, t.val) {
			return false
		}
	}
	return true
}

func anyContains(hay []string, needle string) bool {
	for _, h := range hay {
		if containsFold(h, needle) {
			return true
		}
	}
	return false
}

// containsFold is strings.Contains ignoring ASCII case, without allocating: it runs over every row
// on each keystroke, and a hundred thousand ToLower copies would show.
func containsFold(s, sub string) bool {
	if len(sub) == 0 {
		return true
	}
	if len(sub) > len(s) {
		return false
	}
	first := lower(sub[0])
	for i := 0; i+len(sub) <= len(s); i++ {
		if lower(s[i]) != first {
			continue
		}
		j := 1
		for j < len(sub) && lower(s[i+j]) == lower(sub[j]) {
			j++
		}
		if j == len(sub) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// lineInput is a one-line editor for the filter and the trace search. It is deliberately smaller
// than bubbles/textinput: no blinking cursor, so no timer messages, frames only change on keys and
// golden screens are deterministic.
type lineInput struct {
	prompt string
	value  string
	active bool
}

// update applies a key; done is true on enter (keep) and cancelled on esc (discard).
func (in *lineInput) update(msg tea.KeyMsg) (done, cancelled bool) {
	switch msg.Type {
	case tea.KeyEnter:
		in.active = false
		return true, false
	case tea.KeyEsc:
		in.active = false
		in.value = ""
		return false, true
	case tea.KeyBackspace:
		if in.value != "" {
			_, n := utf8.DecodeLastRuneInString(in.value)
			in.value = in.value[:len(in.value)-n]
		}
	case tea.KeyCtrlU:
		in.value = ""
	case tea.KeySpace:
		in.value += " "
	case tea.KeyRunes:
		in.value += string(msg.Runes)
	}
	return false, false
}

func (in lineInput) view() string {
	return in.prompt + in.value + "█"
}
