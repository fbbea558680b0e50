package tests

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/redistest"
)

// Helpers for the hot-swap tests (hotswap_test.go): serve hosts with an
// admin server, /status and /metrics scrapes, process RSS, the test plugins.

// Test plugins (committed source + .wasm under tests/testdata; build lines
// in each main.go).
var (
	priorityV1Wasm = filepath.Join("..", "plugins", "priority", "priority.wasm")  // the built-in
	priorityV2Wasm = filepath.Join("testdata", "priority-v2", "priority-v2.wasm") // same source, another build
	trapperWasm    = filepath.Join("testdata", "trapper", "trapper.wasm")         // passes the gate, traps on real groups
)

// fileSHA is the sha256 (hex) of a file.
func fileSHA(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// AdminHost is a serve process with its admin server's base URL.
type AdminHost struct {
	*Proc
	URL string // http://127.0.0.1:PORT
}

// ServeAdmin starts `serve` with the runtime lease TTL and an admin server
// on a free port, and waits for the admin address in its log.
func ServeAdmin(t testing.TB, name string, r *redistest.Server, ns, advertise string, extra ...string) AdminHost {
	t.Helper()
	args := append([]string{"--redis", r.URL(), "-n", ns, "serve", "--advertise", advertise,
		"--lease-ttl", rtLeaseTTL.String(), "--admin-addr", "127.0.0.1:0"}, extra...)
	p := StartProc(t, name, args...)
	addr := LogAttr(p.WaitLog(t, 10*time.Second, "admin server listening"), "addr")
	if addr == "" {
		t.Fatalf("%s: no admin address in its log", name)
	}
	return AdminHost{Proc: p, URL: "http://" + addr}
}

// StatusJSON is the part of /status the hot-swap tests read.
type StatusJSON struct {
	Leading bool `json:"leading"`
	Runtime *struct {
		Policies []struct {
			Name     string `json:"name"`
			Version  string `json:"version"`
			SHA256   string `json:"sha256"`
			Registry int    `json:"registry_version"`
			Active   bool   `json:"active"`
			InUse    int    `json:"in_use"`
		} `json:"policies"`
	} `json:"runtime"`
}

// Status fetches /status (ok false on any error: the caller polls).
func (h AdminHost) Status() (StatusJSON, bool) {
	var s StatusJSON
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(h.URL + "/status")
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&s) != nil || s.Runtime == nil {
		return s, false
	}
	return s, true
}

// ActiveSHA is the sha256 of the loaded active version of policy ("" if
// none) and how many versions of it are loaded.
func (s StatusJSON) ActiveSHA(policy string) (sha string, loaded int) {
	if s.Runtime == nil {
		return "", 0
	}
	for _, p := range s.Runtime.Policies {
		if p.Name != policy {
			continue
		}
		loaded++
		if p.Active {
			sha = p.SHA256
		}
	}
	return sha, loaded
}

// Metrics scrapes /metrics and returns the samples of metric whose labels
// include every name=value pair of want, summed by the value of label by.
func (h AdminHost) Metrics(t testing.TB, metric, by string, want ...string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(h.URL + "/metrics")
	if err != nil {
		t.Fatalf("%s: scrape /metrics: %v", h.Name, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels := map[string]string{}
		for _, kv := range strings.Split(line[len(metric)+1:end], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			t.Fatalf("%s: metric line %q: %v", h.Name, line, err)
		}
		out[labels[by]] += v
	}
	return out
}

// Goroutines scrapes the host's go_goroutines gauge from /metrics.
func (h AdminHost) Goroutines(t testing.TB) int {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(h.URL + "/metrics")
	if err != nil {
		t.Fatalf("%s: scrape /metrics: %v", h.Name, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: go_goroutines %q: %v", h.Name, v, err)
			}
			return int(n)
		}
	}
	t.Fatalf("%s: no go_goroutines in /metrics", h.Name)
	return 0
}

// RSSKiB is the resident set size of pid (VmRSS of /proc/PID/status).
func RSSKiB(t testing.TB, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// PolicyList runs `policy list NAME -o json`.
func PolicyList(t testing.TB, r *redistest.Server, ns, name string) client.Policy {
	t.Helper()
	out := cli(t, r, ns, "policy", "list", name, "-o", "json")
	var ps []client.Policy
	if err := json.Unmarshal([]byte(out), &ps); err != nil || len(ps) != 1 {
		t.Fatalf("policy list -o json: %v: %q", err, out)
	}
	return ps[0]
}

// WaitActiveEverywhere polls every host's /status until each reports sha
// as the loaded active version of policy, with no other version of it
// loaded; it returns how long that took.
func WaitActiveEverywhere(t testing.TB, hosts []AdminHost, policy, sha string, d time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(d)
	for _, h := range hosts {
		for {
			s, ok := h.Status()
			if got, n := s.ActiveSHA(policy); ok && got == sha && n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s version %.12s not the only loaded active version after %v: %+v", h.Name, policy, sha, d, s.Runtime)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return time.Since(t0)
}
