//go:build wasip1 && wasmsched_floor

package sdk

import "github.com/wasmsched/wasmsched/internal/abicodec"

// Measurement exports, compiled in only with -tags wasmsched_floor (never in
// a plugin the host loads in production: the built-ins are built without
// it). They run one piece of a decision k times inside a single guest call,
// so a benchmark can divide the call's time by k and see what the Go
// toolchain's wasm code costs under wazero with no call, copy or host work
// around it. policies.BenchmarkGuestFloor uses them; BENCHMARKS.md ("Why
// 20x native is out of reach") has the figures.

// wasmsched_floor_decode decodes the first n input bytes k times and
// returns the number of runs, or 0 if they do not decode.
//
//go:wasmexport wasmsched_floor_decode
func exportFloorDecode(n, k uint32) uint32 {
	if int(n) > len(inBuf) {
		return 0
	}
	in := inBuf[:n]
	for range k {
		if abicodec.DecodeSerialSnapshotView(in, &snap) != nil {
			return 0
		}
	}
	return uint32(len(snap.Active) + len(snap.Waiting))
}

// wasmsched_floor_policy decodes the first n input bytes once, then runs
// the registered serial policy k times on them (what the native benchmark
// times: DecideSerial on a decoded snapshot). It returns the number of
// actions of the last decision, or 0 on bad input or no serial policy.
//
//go:wasmexport wasmsched_floor_policy
func exportFloorPolicy(n, k uint32) uint32 {
	if int(n) > len(inBuf) || serialPolicy == nil {
		return 0
	}
	if abicodec.DecodeSerialSnapshotView(inBuf[:n], &snap) != nil {
		return 0
	}
	for range k {
		sdec.Reset()
		serialPolicy.DecideSerial(&snap, &sdec)
	}
	return uint32(len(sdec.Actions))
}

// wasmsched_floor_encode decides once on the first n input bytes, then
// encodes that decision in place k times. It returns the record's size,
// or 0 if the decision does not fit the in-place layout.
//
//go:wasmexport wasmsched_floor_encode
func exportFloorEncode(n, k uint32) uint32 {
	if _, err := decide(int(n)); err != nil {
		return 0
	}
	var out []byte
	for range k {
		out = encodeSerialInPlace(int(n))
	}
	return uint32(len(out))
}
