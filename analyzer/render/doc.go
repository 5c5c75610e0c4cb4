// Package render writes an analyzer.Report for people and machines: Text for a terminal (the lab's
// tables as the model (docs/principles.md): "origin saw 120 (3.00x)", then each finding as
// observation / evidence / action), JSON (the --format json contract of docs/analyze.md, byte for
// byte what encoding/json makes of the Report), and Markdown for a CI job summary. Renderers only
// write to the io.Writer they are given; the analyzer itself never does I/O.
package render
