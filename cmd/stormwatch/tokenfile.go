package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxTokenFileBytes bounds a bearer token file: tokens are tens to a few thousand bytes (a JWT).
const maxTokenFileBytes = 64 << 10

// readToken reads the bearer token file that flag names: its content, surrounding whitespace
// removed. Every command that takes a token reads it here, so each refuses the same files in the
// same words. The token itself never appears in an error or a log.
func readToken(flag, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	// Bounded: a path given by mistake (a log, /dev/zero) is refused, not read to its end.
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	if len(b) > maxTokenFileBytes {
		return "", fmt.Errorf("%s %s: more than %d bytes, not a token file", flag, path, maxTokenFileBytes)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s %s: the file is empty", flag, path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("%s %s: the token must be one line without spaces", flag, path)
	}
	return tok, nil
}
