package storage

// Test-only views of the embedded scripts (export_test.go: test builds of
// this package only).
var (
	ScriptNames  = scriptNames
	ScriptSource = func(name string) string { return scriptSrc[name] }
)
