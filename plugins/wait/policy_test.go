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
	for _, c := range cases.SerialCases("wait") {
		t.Run(c.Name, func(t *testing.T) {
			d, err := sdk.CallSerial(Wait{}, c.Snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := cases.FormatSerial(d); !cases.Equal(got, c.Want) {
				t.Fatal(cases.Diff(got, c.Want))
			}
		})
	}
}

// The committed wait.wasm, run through the host runtime, must agree with the
// table and with the native result (reasons included).
func TestWasmTable(t *testing.T) {
	wasm, _ := plugins.Builtin("wait")
	p := cases.Load(t, "wait", wasm)
	for _, c := range cases.SerialCases("wait") {
		t.Run(c.Name, func(t *testing.T) {
			d, err := p.DecideSerial(context.Background(), c.Snap)
			if err != nil {
				t.Fatal(err)
			}
			if got := cases.FormatSerial(d); !cases.Equal(got, c.Want) {
				t.Fatal(cases.Diff(got, c.Want))
			}
			native, _ := sdk.CallSerial(Wait{}, c.Snap)
			if fmt.Sprint(native.Actions) != fmt.Sprint(d.Actions) {
				t.Fatalf("wasm %v != native %v", d.Actions, native.Actions)
			}
		})
	}
}

func TestZeroAlloc(t *testing.T) {
	s := cases.BenchSnapshot("wait", 16)
	var d abi.SerialDecision
	Wait{}.DecideSerial(s, &d)
	if n := testing.AllocsPerRun(100, func() { d.Reset(); Wait{}.DecideSerial(s, &d) }); n != 0 {
		t.Fatalf("%v allocs per decision", n)
	}
}

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{16, 256} {
		s := cases.BenchSnapshot("wait", n)
		b.Run(fmt.Sprintf("wait/wasm/waiting=%d", n), func(b *testing.B) {
			wasm, _ := plugins.Builtin("wait")
			p := cases.Load(b, "wait", wasm)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.DecideSerial(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("wait/native/waiting=%d", n), func(b *testing.B) {
			var d abi.SerialDecision
			b.ReportAllocs()
			for b.Loop() {
				d.Reset()
				Wait{}.DecideSerial(s, &d)
			}
		})
	}
}
