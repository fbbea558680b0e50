package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy on loopback in front of one address, run in this
// process by toxiproxy (as a library): faults on one link (a replica's to
// its master, a host's to Redis) without touching the others.
type Proxy struct {
	p  *toxiproxy.Proxy
	mu sync.Mutex
	on map[string]bool // toxics present, by name
}

var (
	toxiServerOnce sync.Once
	toxiServer     *toxiproxy.ApiServer
)

// StartProxy listens on a free loopback port and forwards to upstream. It
// is stopped in t.Cleanup.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	toxiServerOnce.Do(func() {
		toxiServer = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	})
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		p := toxiproxy.NewProxy(toxiServer, fmt.Sprintf("p%d", port), "127.0.0.1:"+strconv.Itoa(port), upstream)
		if lastErr = p.Start(); lastErr == nil {
			t.Cleanup(p.Stop)
			return &Proxy{p: p, on: map[string]bool{}}
		}
	}
	t.Fatalf("redistest: start proxy to %s: %v", upstream, lastErr)
	return nil
}

// Addr is the proxy's listen address (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.p.Listen }

// Port is the proxy's listen port.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.p.Listen)
	n, _ := strconv.Atoi(port)
	return n
}

func (p *Proxy) add(t testing.TB, name, typ, stream, attrs string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on[name] {
		return
	}
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		t.Fatalf("redistest: proxy %s: add %s: %v", p.Addr(), typ, err)
	}
	p.on[name] = true
}

// Cut silently stops every byte both ways on the open connections and on
// new ones (toxiproxy's timeout toxic with timeout 0: nothing is closed,
// data is dropped), until Heal.
func (p *Proxy) Cut(t testing.TB) {
	p.add(t, "cut_up", "timeout", "upstream", `{"timeout":0}`)
	p.add(t, "cut_down", "timeout", "downstream", `{"timeout":0}`)
}

// Latency delays every byte by d each way until Heal.
func (p *Proxy) Latency(t testing.TB, d time.Duration) {
	ms := d.Milliseconds()
	p.add(t, "lat_up", "latency", "upstream", fmt.Sprintf(`{"latency":%d}`, ms))
	p.add(t, "lat_down", "latency", "downstream", fmt.Sprintf(`{"latency":%d}`, ms))
}

// Heal removes every fault.
func (p *Proxy) Heal(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.on {
		if err := p.p.Toxics.RemoveToxic(context.Background(), name); err != nil {
			t.Fatalf("redistest: proxy %s: remove %s: %v", p.Addr(), name, err)
		}
		delete(p.on, name)
	}
}
