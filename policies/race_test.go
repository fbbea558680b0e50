//go:build race

package policies

// raceEnabled: under the race detector wazero's compiler is instrumented
// too, and the sandbox tests that compile many modules or burn CPU until a
// deadline on purpose (the gate's conformance suite, the guest floor's
// exports, the hostile deadline and infinite-loop tests, a guest's panic
// and memory bomb, the kind checks) take 5-40 s each while checking no
// concurrency of ours. They run in the pass without
// -race; under it they skip (skipUnderRace), and the tests of concurrent
// loads, calls and closes keep the detector's ground.
const raceEnabled = true
