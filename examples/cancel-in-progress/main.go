// Command cancel-in-progress is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/cancel-in-progress -o cancel-in-progress.wasm
//
// or go generate (the committed cancel-in-progress.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o cancel-in-progress.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Param{Name: "key", Type: params.TypeString, Default: "ref", Max: "64", Doc: "the label whose value is the concurrency group"},
	)
	sdk.Register(policy{})
}

func main() {}
