// Command trapper is a deliberately broken serial policy for the
// auto-rollback test (tests/hotswap_test.go). It behaves like "wait" on the
// push gate's conformance snapshots (group "conformance"), so `policy push`
// accepts it, and panics (a wasm trap) on every other group: once active,
// every real decision fails.
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o tests/testdata/trapper/trapper.wasm ./tests/testdata/trapper
package main

import (
	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

type trapper struct{}

func (trapper) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	if s.Group != "conformance" {
		panic("trapper: deliberate trap in group " + s.Group)
	}
	free := int(s.EffectiveMaxActive()) - len(s.Active)
	for i := 0; i < free && i < len(s.Waiting); i++ {
		d.Launch(s.Waiting[i].ID, "wait")
	}
}

func init() { sdk.Register(trapper{}) }

func main() {}
