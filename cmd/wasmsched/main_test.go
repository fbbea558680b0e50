package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRun_UsageErrors: bad usage exits 2 with a message naming the problem,
// before anything connects (the Redis URL points at a closed port, so a
// command that tried to connect would fail with exit 1 instead).
func TestRun_UsageErrors(t *testing.T) {
	const closed = "redis://127.0.0.1:1/0"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown-command", []string{"bogus"}, `unknown command "bogus"`},
		{"unknown-subcommand", []string{"group", "bogus"}, `unknown command "bogus"`},
		{"bad-output-before", []string{"-o", "yaml", "--redis", closed, "runs"}, `-o "yaml": want table or json`},
		{"bad-output-after", []string{"runs", "--redis", closed, "-o", "yaml"}, `-o "yaml": want table or json`},
		{"unknown-flag", []string{"runs", "--bogus"}, "flag provided but not defined: --bogus"},
		{"bad-redis-url", []string{"--redis", "notaurl://x", "runs"}, `unknown scheme "notaurl"`},
		{"bad-namespace", []string{"--redis", closed, "-n", "a b", "runs"}, "namespace"},
		{"bad-durable", []string{"--redis", closed + "?durable=maybe", "runs"}, `durable="maybe": want auto, on or off`},
		{"bad-durable-timeout", []string{"--redis", closed + "?durable_timeout=2h", "submit", "g"}, "durable_timeout=2h0m0s: want 1ms..1m"},
		{"bad-slot-guard", []string{"--redis", closed, "serve", "--slot-guard", "-1s"}, "--slot-guard must be >= 0"},
		{"bad-unfit-timeout", []string{"--redis", closed, "serve", "--unfit-timeout", "0s"}, "--unfit-timeout must be > 0"},
		{"bad-max-run-slots", []string{"--redis", closed, "serve", "--max-run-slots", "2000"}, "--max-run-slots must be in 0..1024"},
		{"bad-lost-limit", []string{"--redis", closed, "lost", "--limit", "-1"}, "--limit -1: want 0 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), append([]string{"wasmsched"}, tc.args...), &out, &errb)
			if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errb.String(), exitUsage, tc.want)
			}
			if out.Len() != 0 {
				t.Fatalf("stdout not empty: %q", out.String())
			}
		})
	}
}

// TestRun_RedisUnreachable: a runtime failure is exit 1 and names the address.
func TestRun_RedisUnreachable(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"wasmsched", "--redis", "redis://127.0.0.1:1/0", "runs"}, &out, &errb)
	if code != exitFailure || !strings.Contains(errb.String(), "127.0.0.1:1") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}
