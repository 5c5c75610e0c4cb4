// Package packio holds the primitives of stormwatch's packed forms - the pointer-free byte
// strings the analyzer holds spans (spans.AppendPacked) and operations
// (analyzer/engine/heldops.go) in: zigzag varints, lists that tell nil from empty, and strings
// written once and referred back to. Each form's layout stays with the form; this package reads
// and writes its pieces, so that both forms check corrupt input the same way.
package packio
