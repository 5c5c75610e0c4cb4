package analyzer

// The three counts every screen and report shows, each under one word, with the sentence that
// defines it. Screens print the definitions where the numbers are, so that "10 intents" on the
// dependencies screen and "90 operations" on the operations screen visibly count different things.
const (
	// DefineCalls: DependencyStats.PhysicalCalls (calls in JSON).
	DefineCalls = "calls: requests the dependency received, retries and copies included"
	// DefineIntents: DependencyStats.LogicalOperations (intents in JSON).
	DefineIntents = "intents: what the top layer asked of the dependency, counted once however many layers retried it"
	// DefineOperations: Operation, and InputStats.Operations.
	DefineOperations = "operations: retry loops at every layer; each attempt of a layer above starts new ones below"
	// DefineAmplification: DependencyStats.Amplification.
	DefineAmplification = "amplification = calls / intents"
)
