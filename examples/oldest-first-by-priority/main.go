// Command oldest-first-by-priority is the example policy of
// docs/plugin-authors.md: a serial policy that fills free places (below
// max_active) with the highest-priority WAITING runs, oldest first among
// equal priorities. It never discards or stops.
//
// Build it into a plugin (from the repository root):
//
//	wasmsched policy build ./examples/oldest-first-by-priority -o oldest-first-by-priority.wasm
package main

import "github.com/wasmsched/wasmsched/abi/sdk"

func init() { sdk.Register(OldestFirstByPriority{}) }

func main() {}
