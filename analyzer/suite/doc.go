// Package suite is the explicit list of stormwatch's detectors, as go/analysis's vet suite is:
// adding a detector means adding a line here, and Validate (run by this package's test) keeps the
// names unique and the docs present.
package suite
