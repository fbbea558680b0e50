package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/plugins/internal/cases"
)

func TestMain(m *testing.M) { cases.Main(m) }

// TestTable runs the wait table natively, through the host runtime with the
// committed wait.wasm (which must agree with the native result), and checks
// the native policy does not allocate.
func TestTable(t *testing.T) { cases.TestSerial(t, "wait", policy{}) }

func BenchmarkDecide(b *testing.B) { cases.BenchSerial(b, "wait", policy{}) }

// BenchmarkRatio: native and every wasm build, interleaved (cases.BenchRatio).
func BenchmarkRatio(b *testing.B) { cases.BenchRatio(b, "wait", policy{}) }
