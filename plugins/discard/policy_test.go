package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/plugins/internal/cases"
)

func TestMain(m *testing.M) { cases.Main(m) }

func TestTable(t *testing.T) {
	for _, c := range cases.SerialCases("discard") {
		t.Run(c.Name, func(t *testing.T) {
			d, err := sdk.CallSerial(Discard{}, c.Snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := cases.FormatSerial(d); !cases.Equal(got, c.Want) {
				t.Fatal(cases.Diff(got, c.Want))
			}
		})
	}
}

// The committed discard.wasm, run through the host runtime, must agree with the
// table and with the native result (reasons included).
func TestWasmTable(t *testing.T) {
	wasm, _ := plugins.Builtin("discard")
	p := cases.Load(t, "discard", wasm)
	for _, c := range cases.SerialCases("discard") {
		t.Run(c.Name, func(t *testing.T) {
			d, err := p.DecideSerial(context.Background(), c.Snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := cases.FormatSerial(d); !cases.Equal(got, c.Want) {
				t.Fatal(cases.Diff(got, c.Want))
			}
			native, _ := sdk.CallSerial(Discard{}, c.Snap)
			if fmt.Sprint(native.Actions) != fmt.Sprint(d.Actions) {
				t.Fatalf("wasm %v != native %v", d.Actions, native.Actions)
			}
		})
	}
}

func TestZeroAlloc(t *testing.T) {
	s := cases.BenchSnapshot("discard", 16)
	var d abi.SerialDecision
	Discard{}.DecideSerial(s, &d)
	if n := testing.AllocsPerRun(100, func() { d.Reset(); Discard{}.DecideSerial(s, &d) }); n != 0 {
		t.Fatalf("%v allocs per decision", n)
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{16, 256} {
		s := cases.BenchSnapshot("discard", n)
		b.Run(fmt.Sprintf("discard/wasm/waiting=%d", n), func(b *testing.B) {
			wasm, _ := plugins.Builtin("discard")
			p := cases.Load(b, "discard", wasm)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.DecideSerial(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("discard/native/waiting=%d", n), func(b *testing.B) {
			var d abi.SerialDecision
			b.ReportAllocs()
			for b.Loop() {
				d.Reset()
				Discard{}.DecideSerial(s, &d)
			}
		})
	}
}
