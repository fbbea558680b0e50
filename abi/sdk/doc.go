// Package sdk is the guest SDK for wasmsched policy plugins.
//
// A plugin author writes one type implementing SerialPolicy, ReusePolicy or
// AllocationPolicy,
// registers it, and builds the package as a wasip1 reactor:
//
//	package main
//
//	import "github.com/wasmsched/wasmsched/abi/sdk"
//
//	func init() { sdk.Register(myPolicy{}) }
//	func main() {}
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o my.wasm .
//
// The SDK owns every //go:wasmexport of the ABI (in a file built only for
// wasip1), keeps the input/output buffers and decoded records in globals and
// reuses them, so a policy that only appends to its decision allocates
// nothing per call. On linux the same package compiles without the exports,
// and CallSerial/CallReuse/CallAllocation run a policy natively through the same byte path
// for unit tests.
//
// Built with -tags wasmsched_floor, the SDK adds measurement exports
// (exports_floor_wasip1.go) that loop one piece of a decision inside a
// single guest call; policies.BenchmarkGuestFloor uses them. Never ship such
// a build: the host ignores the extra exports, but they serve no decision.
package sdk
