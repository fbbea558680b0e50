package host

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
)

func TestHost_compactHint(t *testing.T) {
	for _, tc := range []struct {
		name, setting string
		hint          bool
	}{
		{"default encoding: the hint", "64", true},
		{"compact encoding: none", "512", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			if err := srv.Client(t).ConfigSet(context.Background(), "hash-max-listpack-value", tc.setting).Err(); err != nil {
				t.Fatal(err)
			}
			h := startHost(t, srv, Config{Advertise: "127.0.0.1:1", LeaseTTL: 300 * time.Millisecond})
			waitFor(t, 3*time.Second, "the host started", func() bool { return strings.Contains(h.logs.String(), "host started") })
			waitFor(t, 3*time.Second, "leadership", h.Leading) // (the hint is logged before the campaign)
			logs := h.logs.String()
			if got := strings.Contains(logs, "hash_max_listpack_value="+tc.setting); got != tc.hint {
				t.Fatalf("hint logged %v, want %v:\n%s", got, tc.hint, logs)
			}
			if tc.hint && !strings.Contains(logs, "suggested=512") {
				t.Errorf("the hint does not say what to set:\n%s", logs)
			}
		})
	}
}

func TestMulti_compactHintOnce(t *testing.T) {
	r := redistest.Start(t)
	logs := &syncBuffer{}
	m, err := NewMulti(context.Background(), MultiConfig{Client: r.Client(t), Namespaces: []string{"h1", "h2", "h3"},
		Host: Config{Advertise: "a:1", LeaseTTL: 400 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitFor(t, 5*time.Second, "three hosts started", func() bool { return strings.Count(logs.String(), `msg="host started"`) == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "hash_max_listpack_value=64"); n != 1 {
		t.Fatalf("the hint logged %d times for 3 namespaces, want once:\n%s", n, logs.String())
	}
}
