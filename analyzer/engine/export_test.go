package engine

// HeldBytes is every held trace's packed bytes, pending and analyzed: for the external tests that
// check nothing the analysis keeps points into them.
func HeldBytes(a *Analyzer) [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out [][]byte
	for _, t := range a.traces {
		for _, b := range [][]byte{t.pending, t.packed} {
			if len(b) > 0 {
				out = append(out, b)
			}
		}
	}
	return out
}

// OnPack has f told of every buffer of packed spans a makes from now on (f must be safe for
// concurrent use: analyses run outside the analyzer's lock).
func OnPack(a *Analyzer, f func([]byte)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.packed = f
}
