// Package loopback says whether an address names this machine, for every part of stormwatch
// that decides by it: the collector warns when it listens beyond loopback, replay and the lab send
// in plaintext only to loopback, and the analyzer keeps a loopback callee's fixed port in its
// name and reads an Envoy sidecar handing a request to its own app. One rule, so a host the
// collector calls local is local to the analyzer too. It is a pure function of the text, without
// name resolution: "localhost" is loopback by name, any other name is not.
package loopback
