// Package termsafe makes text from the data safe to show on a terminal. Span names, attribute
// values, service names, URLs and the error bodies of remote services are written by whoever
// sends spans; shown as they are, an escape sequence among them retitles the terminal (OSC),
// clears it or leaves the alternate screen (CSI), and a bidi override or a zero-width character
// makes the text read other than it is. Every such character is shown as a visible escape
// instead: `\x1b`, `\u202e`.
//
// [String] escapes one value (a name, a cell, a line of an error), newlines and tabs included.
// [NewWriter] escapes what goes through it but keeps newlines and tabs, for whole reports made by
// our own code from the data. [Frame] escapes a frame of the dashboard but keeps the colour
// sequences (SGR) its styles put there. JSON output is never passed through them: it stays exact.
package termsafe
