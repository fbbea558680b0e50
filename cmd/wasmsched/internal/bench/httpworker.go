package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/host/api"
	"github.com/wasmsched/wasmsched/storage"
)

// HTTP workers (Options.HTTPWorkers): the in-process workers go through
// the worker protocol of an in-process API server (docs/api.md "Workers
// over HTTP") instead of the worker library: each registers, heartbeats,
// reads its assignment stream and reports every run at once (a simulated
// run of the bench's duration). What it measures against the library is
// the protocol's cost: the API's proxy worker, one HTTP report a run, the
// stream.

// startAPI serves the API on a loopback port until the bench ends and
// returns its URL.
func (e *env) startAPI(ctx context.Context, st *storage.Store) (string, error) {
	s, err := api.New(ctx, api.Config{Store: st, Logger: e.log.With("component", "api")})
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: api listener: %w", err)
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		_ = s.Serve(e.runCtx, ln)
		_ = s.Close(context.Background())
	}()
	return "http://" + ln.Addr().String(), nil
}

// httpWorker is one remote worker written against the protocol only.
type httpWorker struct {
	base string // .../namespaces/NS/workers
	id   string
	hc   *http.Client
}

func (w *httpWorker) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", w.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return w.hc.Do(req)
}

// startHTTPWorker registers a remote worker of slots and serves it until
// ctx ends.
func (e *env) startHTTPWorker(ctx context.Context, url, ns string, i, slots int) error {
	tr := &http.Transport{MaxIdleConnsPerHost: slots + 4, MaxConnsPerHost: slots + 4}
	w := &httpWorker{base: url + "/api/v1/namespaces/" + ns + "/workers", hc: &http.Client{Transport: tr}}
	resp, err := w.post(ctx, "", map[string]any{"name": fmt.Sprintf("bench-http-%d", i), "slots": slots,
		"labels": e.workerLabels(), "heartbeat_ttl_ms": 10000})
	if err != nil {
		return fmt.Errorf("bench: register an HTTP worker: %w", err)
	}
	var reg struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("bench: register an HTTP worker: %d %s", resp.StatusCode, reg.Error)
	}
	w.id = reg.ID
	e.wg.Add(2)
	go func() { // heartbeats
		defer e.wg.Done()
		t := time.NewTicker(e.o.HeartbeatTTL)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if resp, err := w.post(ctx, "/"+w.id+"/heartbeat", struct{}{}); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	go func() {
		defer e.wg.Done()
		if err := w.serve(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("bench: HTTP worker stopped", "worker", w.id, "err", err)
		}
	}()
	return nil
}

// serve reads the assignment stream and reports each run (after the
// run's duration, in its own goroutine).
func (w *httpWorker) serve(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, "GET", w.base+"/"+w.id+"/assignments", nil)
	if err != nil {
		return err
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// the reports go in batches: what finished while the last request was
	// out goes in the next (as the Python and TypeScript workers do)
	reports := make(chan map[string]string, 4096)
	go func() {
		for first := range reports {
			batch := []map[string]string{first}
			for len(batch) < 256 && len(reports) > 0 {
				batch = append(batch, <-reports)
			}
			if resp, err := w.post(ctx, "/"+w.id+"/reports", map[string]any{"reports": batch}); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	defer close(reports)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: ") && event == "assign":
			var a struct {
				Run        string `json:"run"`
				Token      string `json:"token"`
				DurationMS int64  `json:"duration_ms"`
			}
			if err := json.Unmarshal([]byte(line[6:]), &a); err != nil {
				return err
			}
			go func() {
				if a.DurationMS > 0 {
					time.Sleep(time.Duration(a.DurationMS) * time.Millisecond)
				}
				reports <- map[string]string{"run": a.Run, "token": a.Token, "result": "ok"}
			}()
		case line == "":
			event = ""
		}
	}
	return sc.Err()
}
