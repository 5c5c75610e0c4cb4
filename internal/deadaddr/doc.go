// Package deadaddr gives tests a loopback address where connections are refused, and stay
// refused for the whole test.
//
// The usual way - listen on port 0, note the port, close the listener - frees the port at once,
// and the next listener to ask for port 0 (the test's own collector, a test running beside it)
// may be given it: the "unreachable" case then reaches something and the test fails now and
// then. Here the port is held by a socket that is bound but never listens: a connection to it is
// refused, and no other socket can bind it (this one does not set SO_REUSEADDR) until the test
// ends.
package deadaddr
