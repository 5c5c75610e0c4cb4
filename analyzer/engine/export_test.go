package engine

import "github.com/stormwatch/stormwatch/analyzer"

// OnPack has f told of every buffer of packed spans a makes from now on (f must be safe for
// concurrent use: analyses run outside the analyzer's lock).
func OnPack(a *Engine, f func([]byte)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.packed = f
}

// HeldOperations is the operations of every trace held, in the store's order (least recently
// updated first), read back where they are held packed: what the windowed detectors would judge
// if they read the store, the reference the window is checked against.
func HeldOperations(a *Engine) []*analyzer.Operation {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ops []*analyzer.Operation
	for t := a.held.front(); t != nil; t = a.held.next(t) {
		r := t.res
		switch {
		case r == nil || r.nOps == 0:
		case r.ops != nil:
			ops = append(ops, r.ops...)
		default:
			var err error
			if ops, err = unpackOps(ops, r.packedOps); err != nil {
				panic(err)
			}
		}
	}
	return ops
}

// WindowDropped is how many operations the window's bound pushed out.
func WindowDropped(a *Engine) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.win.dropped
}

// WindowOperations is the operations in the windowed detectors' window, in its order.
func WindowOperations(a *Engine) []*analyzer.Operation {
	a.mu.Lock()
	refs, from := a.win.take(0)
	a.mu.Unlock()
	ops, errs := readWindow(refs, from)
	if errs != nil {
		panic(errs[0])
	}
	return ops
}
