package cases

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
	"github.com/wasmsched/wasmsched/plugins"
)

// TestSerial checks a serial plugin on its table twice: natively (the Go
// policy value p) and through the host runtime with the committed .wasm
// of the built-in name, which must also agree with the native result,
// reasons included. It also checks the native policy does not allocate.
func TestSerial(t *testing.T, name string, p sdk.SerialPolicy) {
	t.Run("native", func(t *testing.T) {
		for _, c := range SerialCases(name) {
			t.Run(c.Name, func(t *testing.T) {
				d, err := sdk.CallSerial(p, c.Snap)
				if err != nil {
					t.Fatal(err)
				}
				if got := FormatSerial(d); !Equal(got, c.Want) {
					t.Fatal(Diff(got, c.Want))
				}
			})
		}
	})
	t.Run("wasm", func(t *testing.T) {
		wasm, ok := plugins.Builtin(name)
		if !ok {
			t.Fatalf("no built-in %q", name)
		}
		w := Load(t, name, wasm)
		for _, c := range SerialCases(name) {
			t.Run(c.Name, func(t *testing.T) {
				d, err := w.DecideSerial(context.Background(), c.Snap)
				if err != nil {
					t.Fatal(err)
				}
				if got := FormatSerial(d); !Equal(got, c.Want) {
					t.Fatal(Diff(got, c.Want))
				}
				native, _ := sdk.CallSerial(p, c.Snap)
				if fmt.Sprint(native.Actions) != fmt.Sprint(d.Actions) {
					t.Fatalf("wasm %v != native %v", d.Actions, native.Actions)
				}
			})
		}
	})
	testSerialGuests(t, name, p)
	t.Run("zero-alloc", func(t *testing.T) {
		s := BenchSnapshot(name, 16)
		var d abi.SerialDecision
		p.DecideSerial(s, &d)
		if n := testing.AllocsPerRun(100, func() { d.Reset(); p.DecideSerial(s, &d) }); n != 0 {
			t.Fatalf("%v allocs per decision", n)
		}
	})
}

// BenchSerial is BenchmarkDecide/<name>/<wasm|native>/waiting=<N> for a
// serial plugin, N = 16 and 256.
func BenchSerial(b *testing.B, name string, p sdk.SerialPolicy) {
	for _, n := range []int{16, 256} {
		s := BenchSnapshot(name, n)
		b.Run(fmt.Sprintf("%s/wasm/waiting=%d", name, n), func(b *testing.B) {
			wasm, _ := plugins.Builtin(name)
			w := Load(b, name, wasm)
			ctx := context.Background()
			var d abi.SerialDecision // reused, as the coordinator does (DecideSerialInto)
			b.ReportAllocs()
			for b.Loop() {
				if err := w.DecideSerialInto(ctx, s, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
		benchGuests(b, name, s, n)
		b.Run(fmt.Sprintf("%s/native/waiting=%d", name, n), func(b *testing.B) {
			var d abi.SerialDecision
			b.ReportAllocs()
			for b.Loop() {
				d.Reset()
				p.DecideSerial(s, &d)
			}
		})
	}
}
