// Command rate-limit is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/rate-limit -o rate-limit.wasm
//
// or go generate (the committed rate-limit.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o rate-limit.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Int("limit", 1, 1, 64, "launches per period"),
		params.Duration("period", "1s", "1ms", "168h", "the window"),
	)
	sdk.Register(policy{})
}

func main() {}
