package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
	"github.com/wasmsched/wasmsched/internal/storagetest"
	"github.com/wasmsched/wasmsched/storage"
)

// Helpers for the runtime tests (hosts + workers + CLI end to end). They
// build on harness_test.go and leadership_helpers_test.go.

// Short TTLs for the runtime tests: failover and worker death resolve in
// about a second.
const (
	rtLeaseTTL     = time.Second
	rtHeartbeatTTL = 600 * time.Millisecond
)

// SlotAssignment is one assigned slot: worker identity, slot index, run, token.
type SlotAssignment struct {
	Worker string
	Index  int
	Run    string
	Token  string
}

// Assignments lists the assigned slots of live workers, sorted.
func Assignments(s client.Slots) []SlotAssignment {
	var out []SlotAssignment
	for _, w := range s.Workers {
		if !w.Alive {
			continue
		}
		for _, sl := range w.Slots {
			if sl.Run != "" {
				out = append(out, SlotAssignment{w.Identity, sl.Index, sl.Run, sl.Token})
			}
		}
	}
	slices.SortFunc(out, func(a, b SlotAssignment) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	return out
}

// cli runs a CLI command against r / ns and fails the test unless it exits 0.
func cli(t testing.TB, r *redistest.Server, ns string, args ...string) string {
	t.Helper()
	out, code := RunCLI(t, append([]string{"--redis", r.URL(), "-n", ns}, args...)...)
	if code != 0 {
		t.Fatalf("wasmsched %s: exit %d: %s", strings.Join(args, " "), code, out)
	}
	return out
}

// SetGroup runs `group set G --policy P --max-active N`.
func SetGroup(t testing.TB, r *redistest.Server, ns, group, policy string, maxActive int) {
	t.Helper()
	cli(t, r, ns, "group", "set", group, "--policy", policy, "--max-active", strconv.Itoa(maxActive))
}

// Submit runs `submit G --id ID args...` and returns the run id.
func Submit(t testing.TB, r *redistest.Server, ns, group, id string, args ...string) string {
	t.Helper()
	out := cli(t, r, ns, append([]string{"submit", group, "--id", id, "-o", "json"}, args...)...)
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.ID != id {
		t.Fatalf("submit -o json: %v: %q", err, out)
	}
	return id
}

// Runs runs `runs --limit 0 -o json` (optionally for one group) and returns
// the runs by id.
func Runs(t testing.TB, r *redistest.Server, ns, group string) map[string]client.Run {
	t.Helper()
	args := []string{"runs", "--limit", "0", "-o", "json"}
	if group != "" {
		args = append(args, "--group", group)
	}
	out := cli(t, r, ns, args...)
	var rs []client.Run
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("runs -o json: %v: %q", err, out)
	}
	m := make(map[string]client.Run, len(rs))
	for _, x := range rs {
		m[x.ID] = x
	}
	return m
}

// Slots runs `slots -o json`.
func Slots(t testing.TB, r *redistest.Server, ns string) client.Slots {
	t.Helper()
	out := cli(t, r, ns, "slots", "-o", "json")
	var v client.Slots
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("slots -o json: %v: %q", err, out)
	}
	return v
}

// StartWorker starts `wasmsched worker --simulate` with a journal file (in
// the test's temp dir) and returns the process and the journal path.
func StartWorker(t testing.TB, name string, r *redistest.Server, ns, advertise string, slots int, extra ...string) (*Proc, string) {
	t.Helper()
	journal := filepath.Join(t.TempDir(), name+".journal")
	args := append([]string{"--redis", r.URL(), "-n", ns, "worker", "--simulate",
		"--slots", strconv.Itoa(slots), "--advertise", advertise,
		"--heartbeat-ttl", rtHeartbeatTTL.String(), "--journal", journal}, extra...)
	p := StartProc(t, name, args...)
	p.WaitLog(t, 10*time.Second, "worker registered")
	return p, journal
}

// Execution is one line of a worker journal: one execution start.
type Execution struct {
	Worker string // the journal's name (the test's worker name)
	Run    string
	Token  string
	// Attempt is the run's attempt the execution is (1 without retries).
	Attempt int
}

// ReadJournals reads worker journals (name -> path) and returns every
// execution start.
func ReadJournals(t testing.TB, journals map[string]string) []Execution {
	t.Helper()
	var out []Execution
	for name, path := range journals {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) != 3 {
				f.Close()
				t.Fatalf("journal %s: bad line %q", name, sc.Text())
			}
			att, _ := strconv.Atoi(fs[2])
			out = append(out, Execution{Worker: name, Run: fs[0], Token: fs[1], Attempt: att})
		}
		f.Close()
	}
	return out
}

// ExecutionsByRun groups executions by run id.
func ExecutionsByRun(ex []Execution) map[string][]Execution {
	m := map[string][]Execution{}
	for _, e := range ex {
		m[e.Run] = append(m[e.Run], e)
	}
	return m
}

// WaitAllFinal waits until every run of ns is final (via the store) and
// returns them by id.
func WaitAllFinal(t testing.TB, st *storage.Store, d time.Duration) map[string]storage.Run {
	t.Helper()
	var last []storage.Run
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rs, err := storagetest.ListRuns(ctx, st, storage.RunFilter{Limit: 100000})
		cancel()
		if err == nil {
			last = rs
			done := true
			for _, r := range rs {
				if !r.State.Final() {
					done = false
					break
				}
			}
			if done {
				m := make(map[string]storage.Run, len(rs))
				for _, r := range rs {
					m[r.ID] = r
				}
				return m
			}
		}
		if time.Now().After(deadline) {
			var open []string
			for _, r := range last {
				if !r.State.Final() {
					open = append(open, r.ID+"="+string(r.State))
				}
			}
			t.Fatalf("runs not final after %v: %v", d, open)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ActiveSampler samples the active runs of one group through the store
// every few ms and records the maximum seen at once.
type ActiveSampler struct {
	mu   sync.Mutex
	max  int
	seen []string // "t: ids" of the samples at the maximum (for messages)
	stop chan struct{}
	done chan struct{}
}

// SampleActive starts sampling the active runs of group until Stop.
func SampleActive(t testing.TB, st *storage.Store, group string) *ActiveSampler {
	s := &ActiveSampler{stop: make(chan struct{}), done: make(chan struct{})}
	ctx := testCtx(t, 5*time.Minute)
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			rs, err := storagetest.ListRuns(ctx, st, storage.RunFilter{Group: group, Limit: 10000})
			if err == nil {
				var act []string
				for _, r := range rs {
					if r.State.Active() {
						act = append(act, r.ID+"="+string(r.State))
					}
				}
				s.mu.Lock()
				if len(act) > s.max {
					s.max = len(act)
					s.seen = act
				}
				s.mu.Unlock()
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the sampling and returns the maximum and one sample at it.
func (s *ActiveSampler) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Max returns the largest number of runs seen active at once and that sample.
func (s *ActiveSampler) Max() (int, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.seen
}

// WaitRunState waits until run id is in one of states (via the store).
func WaitRunState(t testing.TB, st *storage.Store, id string, d time.Duration, states ...storage.State) storage.Run {
	t.Helper()
	var r storage.Run
	WaitFor(t, d, "run "+id+" in "+fmt.Sprint(states), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		r, err = st.GetRun(ctx, id)
		return err == nil && slices.Contains(states, r.State)
	})
	return r
}

// WaitOut waits up to d for a stdout line containing every one of subs.
func (p *Proc) WaitOut(t testing.TB, d time.Duration, subs ...string) string {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	seen := 0
	for {
		lines, cond := p.out.snapshot()
		for ; seen < len(lines); seen++ {
			if containsAll(lines[seen], subs) {
				return lines[seen]
			}
		}
		select {
		case <-cond:
		case <-p.done:
			lines, _ := p.out.snapshot()
			for ; seen < len(lines); seen++ {
				if containsAll(lines[seen], subs) {
					return lines[seen]
				}
			}
			t.Fatalf("%s exited without a stdout line with %q (exit: %v)", p.Name, subs, p.err)
		case <-deadline.C:
			t.Fatalf("%s: no stdout line with %q within %v", p.Name, subs, d)
		}
	}
}

// RuntimeHost starts `serve` with the runtime TTLs.
func RuntimeHost(t testing.TB, name string, r *redistest.Server, ns, advertise string) *Proc {
	t.Helper()
	return Serve(t, name, r, ns, advertise, rtLeaseTTL)
}

// RestoreQueueLen is the number of runs waiting for the restore decision.
func RestoreQueueLen(t testing.TB, st *storage.Store) int {
	t.Helper()
	q, err := st.Queues(testCtx(t, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return q.Restore
}
