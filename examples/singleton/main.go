// Command singleton is a catalog policy (see README.md): build it with
//
//	wasmsched policy build ./examples/singleton -o singleton.wasm
//
// or go generate (the committed singleton.wasm, reproducible byte for byte).
package main

import (
	"github.com/wasmsched/wasmsched/abi/params"
	"github.com/wasmsched/wasmsched/abi/sdk"
)

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false "-ldflags=-s -w" -o singleton.wasm .

// the parameters it reads, checked by the host at group set, push and
// activation (abi/params)
func init() {
	params.Declare(
		params.Param{Name: "key", Type: params.TypeString, Default: "key", Max: "64", Doc: "the label whose value must run alone"},
	)
	sdk.Register(policy{})
}

func main() {}
