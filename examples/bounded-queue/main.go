// Command bounded-queue is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/bounded-queue -o bounded-queue.wasm
//
// or go generate (the committed bounded-queue.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o bounded-queue.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Int("max_waiting", 1, 0, 10000, "waiting runs kept, the newest (at most the group's --window)"),
	)
	sdk.Register(policy{})
}

func main() {}
