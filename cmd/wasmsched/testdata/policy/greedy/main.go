// Command greedy is a deliberately wrong serial policy for the CLI tests: it
// launches every WAITING run, ignoring max_active, so its decision is invalid
// whenever more runs wait than there are free places (it fails the push
// gate's conformance run and `policy test`).
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o cmd/wasmsched/testdata/policy/greedy/greedy.wasm ./cmd/wasmsched/testdata/policy/greedy
package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

type greedy struct{}

func (greedy) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	for i := range s.Waiting {
		d.Launch(s.Waiting[i].ID, "launch everything")
	}
}

func init() { sdk.Register(greedy{}) }

func main() {}
