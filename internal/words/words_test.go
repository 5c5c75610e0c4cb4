package words

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{
		{0, "finding", "0 findings"},
		{1, "finding", "1 finding"},
		{1, "attempt", "1 attempt"},
		{27, "call", "27 calls"},
		{1234567, "span", "1,234,567 spans"},
		{-1200, "span", "-1,200 spans"},
	} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
	if got := Plural(1, "request refused", "requests refused"); got != "1 request refused" {
		t.Errorf("Plural: %q", got)
	}
}

func TestInt(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 100000: "100,000", -1000: "-1,000"} {
		if got := Int(n); got != want {
			t.Errorf("Int(%d) = %q, want %q", n, got, want)
		}
	}
}
