// Command priority-aging is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/priority-aging -o priority-aging.wasm
//
// or go generate (the committed priority-aging.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o priority-aging.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Duration("age_step", "1m", "1ms", "8760h", "waiting time per priority point"),
	)
	sdk.Register(policy{})
}

func main() {}
