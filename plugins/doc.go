// Package plugins embeds the built-in policy plugins (wait, discard, priority
// and reuse), whose Go sources live in the subdirectories of the same name
// and are built to wasm with the command documented in README.md. The
// plugins/wat-wait directory holds a wait policy written in WAT, the proof
// that the ABI is language-neutral.
package plugins

//go:generate wat2wasm wat-wait/wait.wat -o wat-wait/wat-wait.wasm
