// Package policies runs wasmsched policy plugins in a wazero sandbox.
//
// A Runtime compiles plugins (with a file compilation cache) and enforces the
// sandbox: no filesystem, network, environment or arguments; real clocks and
// a crypto random source; a linear-memory cap (default 32 MiB); a per-call
// deadline (default 50 ms) that stops runaway code; the guest's stdout and
// stderr captured in a bounded ring into errors and the log.
//
// Load checks a plugin against the ABI (abi/ABI.md) and returns a Policy: one
// version with a pool of instances, each used by one goroutine at a time and
// thrown away after any error. DecideSerial and DecideReuse validate every
// decision against its input (ValidateSerial, validateReuse) before anyone
// may apply it. Close waits for calls in flight and frees everything, which
// hot swap relies on.
package policies
