// Package abicodec encodes and decodes the policy ABI's records (package
// abi's types) in their flat little-endian wire form, byte for byte as
// abi/ABI.md specifies: the one codec of the host (package policies) and
// the Go guest SDK (abi/sdk). Decoders never panic on bad bytes; they
// return an error wrapping ErrMalformed. The *View decoders alias the
// input buffer instead of copying strings, for the guest's
// zero-allocation hot path.
package abicodec
