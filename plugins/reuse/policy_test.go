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
	for _, c := range cases.ReuseCases() {
		t.Run(c.Name, func(t *testing.T) {
			d, err := sdk.CallReuse(policy{}, c.Req)
			if err != nil {
				t.Fatal(err)
			}
			if got := cases.FormatReuse(d); !cases.Equal(got, c.Want) {
				t.Fatal(cases.Diff(got, c.Want))
			}
		})
	}
}

func TestWasmTable(t *testing.T) {
	wasm, _ := plugins.Builtin("reuse")
	p := cases.Load(t, "reuse", wasm)
	for _, c := range cases.ReuseCases() {
		t.Run(c.Name, func(t *testing.T) {
			d, err := p.DecideReuse(context.Background(), c.Req)
			if err != nil {
				t.Fatal(err)
			}
			if got := cases.FormatReuse(d); !cases.Equal(got, c.Want) {
				t.Fatal(cases.Diff(got, c.Want))
			}
		})
	}
}

func TestGuestsTable(t *testing.T) { cases.TestReuseGuests(t, policy{}) }

func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{16, 256} {
		r := cases.BenchReuse(n)
		b.Run(fmt.Sprintf("reuse/wasm/waiting=%d", n), func(b *testing.B) {
			wasm, _ := plugins.Builtin("reuse")
			p := cases.Load(b, "reuse", wasm)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.DecideReuse(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("reuse/native/waiting=%d", n), func(b *testing.B) {
			var d abi.ReuseDecision
			b.ReportAllocs()
			for b.Loop() {
				d.Reset()
				policy{}.DecideReuse(r, &d)
			}
		})
	}
}
