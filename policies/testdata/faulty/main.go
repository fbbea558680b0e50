// Command faulty is a deliberately misbehaving serial policy for the fault
// tests of package policies. Its behaviour is chosen by the snapshot's
// max_active; any other value behaves like wait.
//
//	99: infinite loop       98: panic
//	97: memory bomb          96: invalid decision (several problems)
//	95: writes to stdout/stderr, then behaves like wait
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o policies/testdata/faulty/faulty.wasm ./policies/testdata/faulty
package main

import (
	"fmt"
	"os"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

type faulty struct{}

var sink [][]byte
var spin uint64

func (faulty) DecideSerial(s *abi.SerialSnapshot, d *abi.SerialDecision) {
	switch s.MaxActive {
	case 99:
		for {
			spin++
		}
	case 98:
		panic("faulty: deliberate panic in group " + s.Group)
	case 97:
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case 96:
		d.Launch("ghost", "unknown run")
		if len(s.Active) > 0 {
			d.Launch(s.Active[0].ID, "launch an active run")
		}
		if len(s.Waiting) > 0 {
			d.Discard(s.Waiting[0].ID, "first")
			d.Stop(s.Waiting[0].ID, "second action on the same run")
		}
		return
	case 95:
		fmt.Fprintln(os.Stdout, "faulty: hello on stdout")
		fmt.Fprintln(os.Stderr, "faulty: hello on stderr")
	}
	free := int(s.EffectiveMaxActive()) - len(s.Active)
	for i := 0; i < free && i < len(s.Waiting); i++ {
		d.Launch(s.Waiting[i].ID, "wait")
	}
}

func init() { sdk.Register(faulty{}) }

func main() {}
