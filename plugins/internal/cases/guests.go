package cases

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/abi/sdk"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/policies"
)

// Guests are the languages of the example plugins beside the Go built-ins:
// plugins/<lang>/<name>/<name>.wasm, built from source in the same folder
// (plugins/<lang>/build.sh) with the SDK in abi/<lang>. C and Rust have
// every example; AssemblyScript the built-ins' four (GuestsOf).
var Guests = []string{"c", "rust"}

// asExamples are the examples written in AssemblyScript too.
var asExamples = map[string]bool{"wait": true, "discard": true, "priority": true, "priority-first": true}

// GuestsOf are the guest languages with an example of policy name.
func GuestsOf(name string) []string {
	if asExamples[name] {
		return append(append([]string(nil), Guests...), "assemblyscript")
	}
	return Guests
}

// GuestWasm reads the committed wasm of policy name written in lang.
func GuestWasm(tb testing.TB, lang, name string) []byte {
	tb.Helper()
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "..", "..", lang, name, name+".wasm")
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatalf("the %s example of %s: %v (build it with plugins/%s/build.sh)", lang, name, err, lang)
	}
	return b
}

// testSerialGuests runs name's table on each guest through the host
// runtime: the same expectations as the Go plugin, and the same actions
// and reasons as the native policy p.
func testSerialGuests(t *testing.T, name string, p sdk.SerialPolicy) {
	for _, lang := range GuestsOf(name) {
		t.Run("wasm-"+lang, func(t *testing.T) {
			w := Load(t, lang+"-"+name, GuestWasm(t, lang, name))
			table := append(SerialCases(name), Serial{Name: "bench-256", Snap: BenchSnapshot(name, 256)})
			for _, c := range table {
				t.Run(c.Name, func(t *testing.T) {
					d, err := w.DecideSerial(context.Background(), c.Snap)
					if err != nil {
						t.Fatal(err)
					}
					if c.Want != nil || c.Snap.WaitingTotal == 0 && len(c.Snap.Waiting) < 20 {
						if got := FormatSerial(d); !Equal(got, c.Want) {
							t.Fatal(Diff(got, c.Want))
						}
					}
					native, _ := sdk.CallSerial(p, c.Snap)
					if fmt.Sprint(native.Actions, native.Below, native.BelowReason) != fmt.Sprint(d.Actions, d.Below, d.BelowReason) {
						t.Fatalf("%s %v below %d %q != native %v below %d %q", lang, d.Actions, d.Below, d.BelowReason,
							native.Actions, native.Below, native.BelowReason)
					}
				})
			}
		})
	}
}

// TestReuseGuests runs the reuse table on each guest through the host runtime.
func TestReuseGuests(t *testing.T, p sdk.ReusePolicy) {
	for _, lang := range Guests {
		t.Run("wasm-"+lang, func(t *testing.T) {
			w := Load(t, lang+"-reuse", GuestWasm(t, lang, "reuse"))
			for _, c := range ReuseCases() {
				t.Run(c.Name, func(t *testing.T) {
					d, err := w.DecideReuse(context.Background(), c.Req)
					if err != nil {
						t.Fatal(err)
					}
					if got := FormatReuse(d); !Equal(got, c.Want) {
						t.Fatal(Diff(got, c.Want))
					}
					native, _ := sdk.CallReuse(p, c.Req)
					if fmt.Sprint(native) != fmt.Sprint(d) {
						t.Fatalf("%s %+v != native %+v", lang, d, native)
					}
				})
			}
		})
	}
}

// benchGuests is BenchmarkDecide/<name>/wasm-<lang>/waiting=<n>.
func benchGuests(b *testing.B, name string, s *abi.SerialSnapshot, n int) {
	for _, lang := range GuestsOf(name) {
		b.Run(fmt.Sprintf("%s/wasm-%s/waiting=%d", name, lang, n), func(b *testing.B) {
			w := Load(b, lang+"-"+name, GuestWasm(b, lang, name))
			ctx := context.Background()
			var d abi.SerialDecision // reused, as the coordinator does (DecideSerialInto)
			b.ReportAllocs()
			for b.Loop() {
				if err := w.DecideSerialInto(ctx, s, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchRatio is BenchmarkRatio/<name>/waiting=<N> (N = 16, 256): the native
// policy and its wasm builds (Go, C, Rust) decide the same snapshot in
// interleaved blocks of 256 calls, one block of each per iteration, so that
// the machine's swings in speed fall on all of them alike (run by run, as
// BenchmarkDecide does, they do not: a shared machine changes speed between
// two benchmarks). It reports each one's median ns per decision over the
// blocks (ns/native, ns/go, ns/c, ns/rust, ns/assemblyscript where it has
// one) and each guest's ratio to native (x-go, x-c, ...); ns/op is the C
// guest's. Use -benchtime 200x or more.
func BenchRatio(b *testing.B, name string, p sdk.SerialPolicy) {
	for _, n := range []int{16, 256} {
		b.Run(fmt.Sprintf("%s/waiting=%d", name, n), func(b *testing.B) {
			s := BenchSnapshot(name, n)
			ctx := context.Background()
			goWasm, _ := plugins.Builtin(name)
			guests := map[string]*policies.Policy{"go": Load(b, name, goWasm)}
			for _, lang := range GuestsOf(name) {
				guests[lang] = Load(b, lang+"-"+name, GuestWasm(b, lang, name))
			}
			kinds := append([]string{"native", "go"}, GuestsOf(name)...)
			per := map[string][]float64{}
			const block = 256
			var d abi.SerialDecision
			for b.Loop() {
				for _, k := range kinds {
					t0 := time.Now()
					if k == "native" {
						for range block {
							d.Reset()
							p.DecideSerial(s, &d)
						}
					} else {
						for range block {
							if err := guests[k].DecideSerialInto(ctx, s, &d); err != nil {
								b.Fatal(err)
							}
						}
					}
					per[k] = append(per[k], float64(time.Since(t0).Nanoseconds())/block)
				}
			}
			med := map[string]float64{}
			for _, k := range kinds {
				xs := per[k]
				sort.Float64s(xs)
				med[k] = xs[len(xs)/2]
				b.ReportMetric(med[k], "ns/"+k)
			}
			for _, k := range kinds[1:] {
				b.ReportMetric(med[k]/med["native"], "x-"+k)
			}
			b.ReportMetric(med["c"], "ns/op")
		})
	}
}
