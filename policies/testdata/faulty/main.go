// Command faulty is a deliberately misbehaving serial policy for the fault
// tests of package policies. Its behaviour is chosen by the snapshot's
// max_active; any other value behaves like wait.
//
//	99: infinite loop       98: panic
//	97: memory bomb          96: invalid decision (several problems)
//	95: writes to stdout/stderr, then behaves like wait
//	94: launches the waiting runs, newest first (names runs out of order)
//	93: launches the waiting runs by copies of their ids (strings outside
//	    the input: the SDK encodes them the ordinary way)
//	92: rewrites the first byte of the first waiting run's id in its input
//	    buffer to 'X', then launches that string (it now names no run)
//	91: launches the first waiting run with the group's name as the reason
//
// Build (from the repository root):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o policies/testdata/faulty/faulty.wasm ./policies/testdata/faulty
package main

import (
	"fmt"
	"os"
	"strings"
	"unsafe"

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
	case 94:
		for i := len(s.Waiting) - 1; i >= 0; i-- {
			d.Launch(s.Waiting[i].ID, "newest first")
		}
		return
	case 93:
		for i := range s.Waiting {
			d.Launch(strings.Clone(s.Waiting[i].ID), "copied id")
		}
		return
	case 92:
		if len(s.Waiting) > 0 && s.Waiting[0].ID != "" {
			id := s.Waiting[0].ID // aliases the SDK's input buffer
			*(*byte)(unsafe.Pointer(unsafe.StringData(id))) = 'X'
			d.Launch(id, "rewritten id")
		}
		return
	case 91:
		if len(s.Waiting) > 0 {
			d.Launch(s.Waiting[0].ID, s.Group)
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
