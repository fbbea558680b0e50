package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/storage"
)

// TestSlots_guestAllocation: the C and Rust priority-first plugins
// (plugins/<lang>/priority-first, built with the SDKs' allocation kind)
// pushed into a live namespace and set as its allocation policy. By order,
// not by timing: 40 low-priority runs wait for the worker's one slot; 5
// high-priority runs submitted then all start before the low runs still
// waiting (at most 2 low starts in between: a pass already under way).
// Under fifo, the contrast, the high runs wait behind them.
func TestSlots_guestAllocation(t *testing.T) {
	srv := redistest.Start(t)
	for i, policy := range []string{"c", "rust", "fifo"} {
		t.Run(policy, func(t *testing.T) {
			ctx := testCtx(t, 2*time.Minute)
			e := newAllocEnv(t, srv, "guest-alloc-"+policy, 1, 8010+10*i)
			name := policy
			if policy != "fifo" {
				name = "pf-" + policy
				wasm, err := filepath.Abs(filepath.Join("..", "plugins", policy, "priority-first", "priority-first.wasm"))
				if err != nil {
					t.Fatal(err)
				}
				if out := cliURL(t, e.url, e.ns, "policy", "push", name, wasm); !strings.Contains(out, "(allocation, ") {
					t.Fatalf("policy push: %q", out)
				}
			}
			if out := cliURL(t, e.url, e.ns, "namespace", "set", "--allocate", name); !strings.Contains(out, "allocates with "+name) {
				t.Fatalf("namespace set: %q", out)
			}
			if _, err := e.st.SetGroup(ctx, "jobs", "wait", 1000); err != nil {
				t.Fatal(err)
			}
			submit := func(prefix string, n, prio int) []string {
				var reqs []storage.SubmitRequest
				var ids []string
				for j := range n {
					id := fmt.Sprintf("%s-%02d", prefix, j)
					reqs = append(reqs, storage.SubmitRequest{Group: "jobs", ID: id, Priority: prio, Duration: 20 * time.Millisecond})
					ids = append(ids, id)
				}
				for _, r := range e.st.SubmitBatch(ctx, reqs) {
					if r.Err != nil {
						t.Fatal(r.Err)
					}
				}
				return ids
			}
			low := submit("low", 40, 0)
			WaitFor(t, 30*time.Second, "the low runs launched, waiting for the slot", func() bool {
				v, err := e.st.AllocationState(ctx, 1, false)
				return err == nil && v.Total >= 30 && v.Free == 0
			})
			high := submit("high", 5, 9)
			all := WaitAllFinal(t, e.st, 60*time.Second)
			var highSub, lastHigh time.Time
			for _, id := range high {
				r := all[id]
				if r.State != storage.StateSucceeded {
					t.Fatalf("%s: %s (%s)", id, r.State, r.Reason)
				}
				if highSub.IsZero() || r.SubmittedAt.Before(highSub) {
					highSub = r.SubmittedAt
				}
				if r.StartedAt.After(lastHigh) {
					lastHigh = r.StartedAt
				}
			}
			between := 0 // low runs started after the high ones were submitted, before the last of them started
			for _, id := range low {
				r := all[id]
				if r.State != storage.StateSucceeded {
					t.Fatalf("%s: %s (%s)", id, r.State, r.Reason)
				}
				if r.StartedAt.After(highSub) && r.StartedAt.Before(lastHigh) {
					between++
				}
			}
			checkJournals(t, all, map[string]string{"w": e.journal})
			t.Logf("%s: %d low-priority runs started between the high ones' submit and the last high start", name, between)
			if policy == "fifo" {
				if between < 20 {
					t.Fatalf("fifo: only %d low runs started before the last high one: the contrast does not hold", between)
				}
			} else if between > 2 {
				t.Fatalf("%s: %d low-priority runs started before the last high-priority one (want at most 2)", name, between)
			}
		})
	}
}
