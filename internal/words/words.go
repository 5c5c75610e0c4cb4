package words

import (
	"strconv"
	"strings"
)

// Int writes n with thousands separators: 1234567 is 1,234,567.
func Int(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Count writes n and the noun, singular for exactly one: Count(1, "finding") is "1 finding",
// Count(1200, "call") is "1,200 calls". Nouns whose plural is not noun+"s" go through Plural.
func Count(n int, noun string) string {
	return Plural(n, noun, noun+"s")
}

// Plural writes n and one or many: Plural(2, "was", "were") is "2 were".
func Plural(n int, one, many string) string {
	return Int(int64(n)) + " " + Noun(int64(n), one, many)
}

// Noun is one or many as n asks, for counts printed some other way (plain digits for scripts).
func Noun(n int64, one, many string) string {
	if n == 1 || n == -1 {
		return one
	}
	return many
}
