package tests

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/internal/redistest"
)

// TestAPITokensReloadOnSIGHUP: `serve --api-tokens` reads the token file
// at start and again on SIGHUP: after the file is rewritten and the
// process signalled, the new token is accepted and the removed one is
// 401; a broken file on a later SIGHUP keeps the tokens in force.
func TestAPITokensReloadOnSIGHUP(t *testing.T) {
	r := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "tokens")
	const oldTok, newTok = "old-token-0123456789abcdef", "new-token-0123456789abcdef"
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(oldTok + " admin\n")
	p := Serve(t, "host", r, "auth", "127.0.0.1:7991", rtLeaseTTL, "--api-addr", "127.0.0.1:7992", "--api-tokens", file)
	p.WaitLog(t, 10*time.Second, "api server listening")
	status := func(tok string) int {
		req, _ := http.NewRequest("GET", "http://127.0.0.1:7992/api/v1/whoami", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if a, b := status(oldTok), status(newTok); a != 200 || b != 401 {
		t.Fatalf("before the reload: old %d new %d, want 200 401", a, b)
	}
	write(newTok + " read\n")
	p.Signal(syscall.SIGHUP)
	p.WaitLog(t, 10*time.Second, "api tokens reloaded")
	if a, b := status(oldTok), status(newTok); a != 401 || b != 200 {
		t.Fatalf("after the reload: old %d new %d, want 401 200", a, b)
	}
	write("not a token file\n")
	p.Signal(syscall.SIGHUP)
	p.WaitLog(t, 10*time.Second, "api tokens not reloaded")
	if b := status(newTok); b != 200 {
		t.Fatalf("after a bad file: new %d, want 200 (the old tokens stay)", b)
	}
	if p.Exited() {
		t.Fatal("serve exited on SIGHUP")
	}
}
