package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

// rec is what bench reads back of a run.
type rec struct {
	state                                  string
	submitted, started, finished, launched int64 // unix ms (Redis TIME)
}

// readRuns reads the runs ids (storage.GetRuns, pipelined in chunks); a
// run that is gone reads as state "".
func readRuns(ctx context.Context, st *storage.Store, ids []string) ([]rec, error) {
	out := make([]rec, len(ids))
	const chunk = 1000
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	for lo := 0; lo < len(ids); lo += chunk {
		hi := min(lo+chunk, len(ids))
		runs, err := st.GetRuns(ctx, ids[lo:hi])
		if err != nil {
			return nil, err
		}
		byID := make(map[string]*storage.Run, len(runs))
		for i := range runs {
			byID[runs[i].ID] = &runs[i]
		}
		for i := lo; i < hi; i++ {
			if r := byID[ids[i]]; r != nil {
				out[i] = rec{state: string(r.State), submitted: ms(r.SubmittedAt), launched: ms(r.LaunchedAt),
					started: ms(r.StartedAt), finished: ms(r.FinishedAt)}
			}
		}
	}
	return out, nil
}

// waitFinal waits until every run of ids is final, from the namespace's
// run events (w, subscribed before the first submit): the bench reads no
// run while the engine works, so what it measures of Redis is the
// engine's. A second after a missed batch, or after a second without
// events, it re-reads the runs not yet final. It returns when the last one
// is final.
func waitFinal(ctx context.Context, st *storage.Store, w *storage.RunWatch, ids []string, errw io.Writer) error {
	open := make(map[string]bool, len(ids))
	for _, id := range ids {
		open[id] = true
	}
	reread := func() {
		left := make([]string, 0, len(open))
		for id := range open {
			left = append(left, id)
		}
		recs, err := readRuns(ctx, st, left)
		if err != nil {
			return
		}
		for i, r := range recs {
			if storage.State(r.state).Final() {
				delete(open, left[i])
			}
		}
	}
	report := time.Now()
	quiet := time.NewTimer(time.Second)
	defer quiet.Stop()
	late := time.NewTimer(time.Hour) // a re-read after a missed batch
	defer late.Stop()
	missed := false
	for len(open) > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out with %d runs not final", len(open))
		case b, ok := <-w.C:
			if !ok {
				return errors.New("the run-events subscription ended")
			}
			for _, ev := range b.Events {
				if ev.State.Final() {
					delete(open, ev.Run)
				}
			}
			if b.Missed && !missed {
				// re-read once the burst is over (a second without events,
				// or a second from now), not at once: 10,000 reads while
				// the engine works would be the harness's load on Redis,
				// and batches missed meanwhile would call for more
				missed = true
				late.Reset(time.Second)
			}
			quiet.Reset(time.Second)
		case <-late.C:
			if missed {
				missed = false
				reread()
			}
		case <-quiet.C:
			missed = false
			reread()
			quiet.Reset(time.Second)
		}
		if time.Since(report) > 5*time.Second && len(open) > 0 {
			report = time.Now()
			fmt.Fprintf(errw, "bench: %d runs not final yet\n", len(open))
		}
	}
	return nil
}

func summarize(o Options, recs []rec, submitTook time.Duration) *Result {
	res := &Result{
		Namespace: o.Namespace, Groups: o.Groups, Policy: o.Policy, Window: o.Window, Runs: o.Runs, Hosts: o.Hosts, Workers: o.Workers,
		SlotsPerWorker: o.Slots, RunDurationMS: float64(o.Duration) / 1e6, Clients: o.Clients,
		SubmitBatch: o.SubmitBatch, SubmitSeconds: submitTook.Seconds(), States: map[string]int{},
	}
	if submitTook > 0 {
		res.SubmitsPerSec = float64(o.Runs) / submitTook.Seconds()
	}
	var first, lastStart, lastFinal int64
	var toRun, toFinal, toLaunch, launchToRun []float64
	for _, r := range recs {
		st := r.state
		if st == "" {
			st = "MISSING"
		}
		res.States[st]++
		if r.submitted > 0 && (first == 0 || r.submitted < first) {
			first = r.submitted
		}
		if r.launched > 0 {
			toLaunch = append(toLaunch, float64(r.launched-r.submitted))
			if r.started > 0 {
				launchToRun = append(launchToRun, float64(r.started-r.launched))
			}
		}
		if r.started > 0 {
			lastStart = max(lastStart, r.started)
			toRun = append(toRun, float64(r.started-r.submitted))
		}
		if r.finished > 0 && storage.State(r.state).Final() {
			lastFinal = max(lastFinal, r.finished)
			toFinal = append(toFinal, float64(r.finished-r.submitted))
		}
	}
	if lastStart > first {
		res.LaunchSeconds = float64(lastStart-first) / 1e3
		res.LaunchesPerSec = float64(len(toRun)) / res.LaunchSeconds
	}
	if lastFinal > first {
		res.FinishSeconds = float64(lastFinal-first) / 1e3
		res.FinishesPerSec = float64(len(toFinal)) / res.FinishSeconds
	}
	res.SubmitToLaunch = percentiles(toLaunch)
	res.LaunchToRun = percentiles(launchToRun)
	res.SubmitToRun = percentiles(toRun)
	res.SubmitToFinal = percentiles(toFinal)
	return res
}

func percentiles(v []float64) Latency {
	if len(v) == 0 {
		return Latency{}
	}
	slices.Sort(v)
	at := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: v[len(v)-1]}
}

// Table prints r for humans.
func Table(w io.Writer, r *Result) {
	fmt.Fprintf(w, "namespace\t%s\n", r.Namespace)
	fmt.Fprintf(w, "setup\t%d runs over %d groups (policy %s); %d host(s); %d worker(s) x %d slots; run duration %gms; %d clients x %d runs per pipelined submit\n",
		r.Runs, r.Groups, r.Policy, r.Hosts, r.Workers, r.SlotsPerWorker, r.RunDurationMS, r.Clients, r.SubmitBatch)
	fmt.Fprintf(w, "durable\t%t\t(writes wait for a replica: the URL's durable=, docs/operations.md)\n", r.Durable)
	if r.ListpackValue > 0 {
		note := "run records stay listpacks"
		if r.ListpackValue < storage.CompactRecordsValue {
			note = fmt.Sprintf("run records are hashtables; %d keeps them listpacks: docs/operations.md \"Redis\"", storage.CompactRecordsValue)
		}
		fmt.Fprintf(w, "hash-max-listpack-value\t%d\t(%s)\n", r.ListpackValue, note)
	}
	fmt.Fprintf(w, "submits/s\t%.0f\t(%.2fs; the harness's load generator, not the engine)\n", r.SubmitsPerSec, r.SubmitSeconds)
	fmt.Fprintf(w, "launches/s\t%.0f\t(%.2fs from first submit to last RUNNING: runs made RUNNING by the engine)\n", r.LaunchesPerSec, r.LaunchSeconds)
	fmt.Fprintf(w, "finishes/s\t%.0f\t(%.2fs from first submit to last final)\n", r.FinishesPerSec, r.FinishSeconds)
	fmt.Fprintf(w, "submit->LAUNCHED ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\t(coordinator)\n", r.SubmitToLaunch.P50, r.SubmitToLaunch.P90, r.SubmitToLaunch.P99, r.SubmitToLaunch.Max)
	fmt.Fprintf(w, "LAUNCHED->RUNNING ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\t(slot manager)\n", r.LaunchToRun.P50, r.LaunchToRun.P90, r.LaunchToRun.P99, r.LaunchToRun.Max)
	fmt.Fprintf(w, "submit->RUNNING ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\n", r.SubmitToRun.P50, r.SubmitToRun.P90, r.SubmitToRun.P99, r.SubmitToRun.Max)
	fmt.Fprintf(w, "submit->final ms\tp50 %.0f\tp90 %.0f\tp99 %.0f\tmax %.0f\n", r.SubmitToFinal.P50, r.SubmitToFinal.P90, r.SubmitToFinal.P99, r.SubmitToFinal.Max)
	states := make([]string, 0, len(r.States))
	for s := range r.States {
		states = append(states, s)
	}
	slices.Sort(states)
	for _, s := range states {
		fmt.Fprintf(w, "state %s\t%d\n", s, r.States[s])
	}
	fmt.Fprintf(w, "process CPU per run\t%.0f µs\t(this process: the in-process hosts, workers and clients)\n", r.ProcessCPUUSPerRun)
	if tr := r.Trace; tr != nil {
		fmt.Fprintf(w, "trace spans\t%d\t(%.2f a run; %d OTLP requests, %d bytes)\n", tr.Spans, tr.SpansPerRun, tr.ExportRequests, tr.ExportBytes)
	}
	if c := r.Redis; c != nil {
		fmt.Fprintf(w, "Redis time per run\t%.0f µs\t(scripts %.0f, other commands %.0f; INFO commandstats of what the hosts, workers and clients sent)\n",
			c.USPerRun, c.ScriptUSPerRun, c.DirectUSPerRun)
		fmt.Fprintf(w, "Redis CPU per run\t%.0f µs\t(used_cpu_user+sys: everything, the network included)\n", c.CPUUSPerRun)
		fmt.Fprintf(w, "commands per run\t%.2f\n", c.CommandsPerRun)
		names := make([]string, 0, len(c.Commands))
		for n := range c.Commands {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int {
			if c.Commands[a] != c.Commands[b] {
				if c.Commands[a] > c.Commands[b] {
					return -1
				}
				return 1
			}
			return strings.Compare(a, b)
		})
		for _, n := range names {
			fmt.Fprintf(w, "\t%.3f %s\n", c.Commands[n], n)
		}
		for _, sc := range c.Scripts {
			fmt.Fprintf(w, "script %s\t%.1f µs per run\t(%.2f calls, %.1f µs each)\n", sc.Name, sc.USPerRun, sc.CallsPerRun, sc.USPerCall)
		}
	}
	if r.DueAt != nil {
		fmt.Fprintf(w, "delayed runs\tdue at %s; the last RUNNING %.0f ms after\t(not_before -> RUNNING p50 %.0f p99 %.0f max %.0f ms)\n",
			r.DueAt.Format(time.RFC3339), r.DueToAllRunningMS, r.DueToRunning.P50, r.DueToRunning.P99, r.DueToRunning.Max)
		if r.WaitCommandsPerS != nil {
			fmt.Fprintf(w, "while they waited\t%.1f commands/s\t%v\n", *r.WaitCommandsPerS, r.WaitCommands)
		}
	}
	if r.SlowLog && len(r.SlowCommands) == 0 {
		fmt.Fprintf(w, "slowest Redis command\tnone over 1 ms\n")
	}
	if len(r.SlowCommands) > 0 {
		fmt.Fprintf(w, "slowest Redis command\t%.2f ms\n", r.SlowestMS)
		for _, c := range r.SlowCommands {
			fmt.Fprintf(w, "\t%s\n", c)
		}
	}
	fmt.Fprintf(w, "cleaned up\t%t\n", r.CleanedUp)
}
