// Package abi is the contract between the wasmsched host and its policy
// plugins (ABI version 3, see ABI.md): the Go record types, and the
// encoders/decoders of their flat little-endian wire form, shared by the host
// (package policies) and the guest SDK (package abi/sdk).
//
// It imports only the standard library because it is compiled into every
// plugin. Decoders never panic on bad bytes; they return an error wrapping
// ErrMalformed. The *View decoders alias the input buffer instead of copying
// strings, for the guest's zero-allocation hot path.
package abi
