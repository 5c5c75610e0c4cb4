// Package fakeclock is a discrete-event clock for the reference client, its tests and the lab. It
// implements reference.Clock. Time moves only when told to (Advance) or, in auto mode, when every
// participant is waiting on the clock: then it jumps to the next timer. A 2 s origin, a 5 s breaker
// recovery and a 1 s deadline thus take no real time and give exact figures.
//
// Auto mode needs to know who is still working. Participants hold a token while they run (Hold,
// Release, Go); Sleep gives the caller's token back while it waits and takes it again when it wakes.
// A token may travel with work handed to another goroutine (the lab hands a caller's token to the
// origin handler that serves its request). Vetoes (AddVeto) report work that is about to resume
// although nobody holds a token for it yet, such as a goroutine whose context was just cancelled.
//
// A clock whose owner stops moving it must be closed (Close): sleepers still waiting wake with
// ErrClosed instead of waiting for good, and later Sleeps fail at once.
package fakeclock
