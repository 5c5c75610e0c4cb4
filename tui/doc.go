// Package tui is stormwatch's live terminal dashboard: a Bubble Tea program that reads immutable
// analyzer snapshots and lets an engineer mid-incident go from "which dependency is being hammered"
// to the one trace that proves who multiplies the load.
//
// The root [Model] switches on a screen enum and forwards messages to the active child (the glow
// pattern); each child returns its concrete type. Everything that touches the world - pulling a
// snapshot, looking up a trace, writing an export file, starting demo traffic - runs in a tea.Cmd, so
// the UI goroutine never waits on ingestion. Snapshots arrive by a re-armed tick at a bounded rate;
// derived rows (sorting, filtering) are rebuilt once per new snapshot, and View renders only the rows
// that fit on screen, so a frame costs the same with a thousand operations held or a hundred thousand.
//
// Styles live in theme.go and key bindings in keys.go; the help overlay is rendered by help.Model from
// that key map so it cannot drift from the bindings.
package tui
