// Package abi is the contract between the wasmsched host and its policy
// plugins (ABI version 4, see ABI.md): the Go record types a policy reads
// (SerialSnapshot, ReuseRequest) and writes (SerialDecision,
// ReuseDecision), their states, kinds and verdicts.
//
// It imports only the standard library because it is compiled into every
// plugin. The records' flat little-endian wire form is specified byte by
// byte in ABI.md (what SDKs in other languages implement, as abi/c and
// abi/rust do); the Go encoders and decoders of it are shared by the host
// (package policies) and the Go guest SDK (abi/sdk) in internal/abicodec,
// so plugin authors never handle bytes.
package abi
