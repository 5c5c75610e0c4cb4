// Package fakeclock is a discrete-event clock for the reference client, its tests and the lab. It
// implements reference.Clock. Time moves only when told to (Advance, Step) or, in auto mode, when
// every participant is waiting on the clock: then it jumps to the next deadline. A 2 s origin, a
// 5 s breaker recovery and a 1 s deadline thus take no real time and give exact figures.
//
// Auto mode must know who could still do something at the current instant, so the goroutines of a
// simulation are counted explicitly. A participant is a goroutine registered with Hold (and
// unregistered with Release) or started through the clock (Go, Group.Go). A participant blocked in
// Sleep or Group.Wait is waiting; the clock advances only when the number waiting equals the
// number of participants, no waiter's context is already done (it is about to resume) and no veto
// objects. Every hand-over happens under the clock's lock: a timer that fires, or a Group whose
// count drops to zero, marks its waiters running before anyone can observe the clock idle, so a
// woken goroutine is never overtaken by time. A participant blocked on anything else (a channel,
// a lock, the network) is running as far as the clock knows, and time stands still meanwhile.
//
// A goroutine that is not a participant may wait on the clock on behalf of one that is blocked
// waiting for it: the lab's origin handlers sleep for the caller whose request they serve, and the
// pair counts once. Vetoes (AddVeto) report such a participant about to resume on its own (its
// request was cancelled while the handler slept).
//
// A clock whose owner stops moving it must be closed (Close): sleepers still waiting wake with
// ErrClosed instead of waiting for good, and later Sleeps fail at once.
package fakeclock
