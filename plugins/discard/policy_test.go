package main

import (
	"testing"

	"github.com/wasmsched/wasmsched/plugins/internal/cases"
)

func TestMain(m *testing.M) { cases.Main(m) }

// TestTable runs the discard table natively, through the host runtime with the
// committed discard.wasm (which must agree with the native result), and checks
// the native policy does not allocate.
func TestTable(t *testing.T) { cases.TestSerial(t, "discard", policy{}) }

func BenchmarkDecide(b *testing.B) { cases.BenchSerial(b, "discard", policy{}) }

// BenchmarkRatio: native and every wasm build, interleaved (cases.BenchRatio).
func BenchmarkRatio(b *testing.B) { cases.BenchRatio(b, "discard", policy{}) }
