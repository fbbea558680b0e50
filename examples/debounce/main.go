// Command debounce is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/debounce -o debounce.wasm
//
// or go generate (the committed debounce.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o debounce.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Duration("period", "1s", "1ms", "168h", "the quiet period after the newest submit"),
		params.Duration("max_wait", "", "0s", "168h", "the longest the oldest waiting run waits (0: no bound)"),
	)
	sdk.Register(policy{})
}

func main() {}
