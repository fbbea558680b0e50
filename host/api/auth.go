package api

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
)

// scope is what a token may do.
type scope string

// Scopes. An admin token may do everything a read token may; a worker
// token may only register workers and, for the workers it registered,
// heartbeat, receive assignments and report them (the worker routes).
const (
	scopeRead   scope = "read"
	scopeAdmin  scope = "admin"
	scopeWorker scope = "worker"
)

// Tokens is a token file: one "TOKEN SCOPE" per line (scope read, admin
// or worker); blank lines and lines starting with # are skipped. Reload
// re-reads it (the CLI calls it on SIGHUP); a bad file keeps the tokens
// already loaded.
type Tokens struct {
	path string
	mu   sync.RWMutex
	toks []token
}

type token struct {
	sum   [32]byte // sha256 of the token: compared in constant time
	scope scope
	label string // "FILE:LINE", for the record (never the token)
}

// MinTokenLen is the shortest token accepted.
const MinTokenLen = 16

// LoadTokens reads a token file.
func LoadTokens(path string) (*Tokens, error) {
	t := &Tokens{path: path}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload re-reads the file; on an error the old tokens stay.
func (t *Tokens) Reload() error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("api: tokens: %w", err)
	}
	defer f.Close()
	var toks []token
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 2 {
			return fmt.Errorf("api: tokens %s:%d: want \"TOKEN SCOPE\", got %d fields", t.path, n, len(fs))
		}
		sc := scope(fs[1])
		if sc != scopeRead && sc != scopeAdmin && sc != scopeWorker {
			return fmt.Errorf("api: tokens %s:%d: scope %q: want read, admin or worker", t.path, n, fs[1])
		}
		if len(fs[0]) < MinTokenLen {
			return fmt.Errorf("api: tokens %s:%d: token is %d characters, at least %d", t.path, n, len(fs[0]), MinTokenLen)
		}
		toks = append(toks, token{sum: sha256.Sum256([]byte(fs[0])), scope: sc, label: fmt.Sprintf("%s:%d", t.path, n)})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("api: tokens: %w", err)
	}
	if len(toks) == 0 {
		return fmt.Errorf("api: tokens %s: no token in the file", t.path)
	}
	t.mu.Lock()
	t.toks = toks
	t.mu.Unlock()
	return nil
}

// Len is the number of tokens loaded.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.toks)
}

// lookup finds s among the tokens, comparing every one in constant time.
func (t *Tokens) lookup(s string) (token, bool) {
	sum := sha256.Sum256([]byte(s))
	t.mu.RLock()
	defer t.mu.RUnlock()
	var found token
	ok := 0
	for _, tk := range t.toks {
		if subtle.ConstantTimeCompare(sum[:], tk.sum[:]) == 1 {
			found, ok = tk, 1
		}
	}
	return found, ok == 1
}

// cookieName holds the UI's token (HttpOnly).
const cookieName = "wasmsched_token"

// requestToken is the bearer token or the UI cookie.
func requestToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		// the scheme is case-insensitive (RFC 9110 11.1): bearer, BEARER...
		if scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
		return ""
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return c.Value
	}
	return ""
}

// principal is who made a request.
type principal struct {
	scope scope
	who   string
}

// authorize checks a request against the tokens: write (any method but
// GET/HEAD) needs admin; a worker route (workerRoute) takes a worker token
// too, and no other route does.
func (s *Server) authorize(r *http.Request, workerRoute bool) (principal, error) {
	if err := sameOrigin(r); err != nil {
		return principal{}, err
	}
	if s.cfg.Tokens == nil {
		return principal{scope: scopeAdmin, who: "api (open)"}, nil
	}
	tok := requestToken(r)
	if tok == "" {
		return principal{}, errorf(http.StatusUnauthorized, "unauthorized", "a token is required: Authorization: Bearer TOKEN")
	}
	tk, ok := s.cfg.Tokens.lookup(tok)
	if !ok {
		return principal{}, errorf(http.StatusUnauthorized, "unauthorized", "unknown token")
	}
	p := principal{scope: tk.scope, who: "api (token " + tk.label + ")"}
	switch {
	case tk.scope == scopeWorker && !workerRoute && r.URL.Path != "/api/v1/whoami":
		return principal{}, errorf(http.StatusForbidden, "forbidden", "this token has scope worker; %s %s needs a read or admin token (a worker token may register workers and serve them)", r.Method, r.URL.Path)
	case tk.scope == scopeWorker || tk.scope == scopeAdmin:
		return p, nil
	case workerRoute:
		return principal{}, errorf(http.StatusForbidden, "forbidden", "this token has scope %s; %s %s needs a worker or admin token", tk.scope, r.Method, r.URL.Path)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return principal{}, errorf(http.StatusForbidden, "forbidden", "this token has scope read; %s %s needs an admin token", r.Method, r.URL.Path)
	}
	return p, nil
}

// sameOrigin refuses a write a browser sent from another origin: a page
// on any site could otherwise POST to an open API on loopback (a dev
// instance) or ride the UI's cookie. Browsers always send Origin on
// cross-origin POST/PUT; tools (curl, the Go client) send none.
func sameOrigin(r *http.Request) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host {
		return errorf(http.StatusForbidden, "forbidden", "cross-origin %s from %s refused: the API takes writes from its own UI or from non-browser clients", r.Method, o)
	}
	return nil
}
