package worker

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// What a worker remembers of the assignments it ran, so that it never
// starts one twice even when the store forgets that it ran it (a Redis
// failover to a replica that missed the report, issue 29):
//
//   - every token it started or settled, with the outcome once known, for
//     TokenMemory after it was recorded and at most MaxRememberedTokens
//     (the oldest go first; a token still running or unreported stays). A
//     remembered token the store assigns again is not started: its outcome
//     is reported again (or FAILED "already executed" when the outcome is
//     not known).
//   - per slot of its current identity, the highest token it started
//     there, for as long as the identity lives: a token at or below it was
//     issued before a run this worker already started on that slot, so it
//     is a rolled-back assignment, never a new one (tokens are
//     "REDIS_MS-COUNTER" and a slot's assignments follow one another). It
//     is reported FAILED without running, which is what keeps the promise
//     after a token's memory ran out.
const (
	// TokenMemory is how long a worker remembers a token it ran.
	TokenMemory = 15 * time.Minute
	// MaxRememberedTokens bounds the tokens remembered (about 200 bytes
	// each plus the outcome's result and output).
	MaxRememberedTokens = 10_000
)

// memo is one remembered token.
type memo struct {
	at       time.Time // when it was started or settled
	outcome  *finished // nil until the execution finished
	reported time.Time // when the store acknowledged its report; zero before
}

// tokenMemory is the agent's memory of tokens (under agent.mu).
type tokenMemory struct {
	entries map[string]*memo
	order   []string            // tokens, oldest first (pruned lazily)
	high    map[string]tokenKey // by "identity#slot"
	max     int
	keep    time.Duration
}

func newTokenMemory() *tokenMemory {
	return &tokenMemory{entries: map[string]*memo{}, high: map[string]tokenKey{}, max: MaxRememberedTokens, keep: TokenMemory}
}

// tokenKey orders assignment tokens "MS-COUNTER" and "MS-COUNTER.K" (MS
// from Redis TIME, COUNTER a namespace-wide INCR, K the K-th token of a
// script that made many with one INCR: storage's new_token). A token
// without .K is K 0: no script makes both forms from one COUNTER.
type tokenKey struct{ ms, n, k int64 }

func parseToken(tok string) (tokenKey, bool) {
	a, b, ok := strings.Cut(tok, "-")
	if !ok {
		return tokenKey{}, false
	}
	b, c, batched := strings.Cut(b, ".")
	ms, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseInt(b, 10, 64)
	var k int64
	var err3 error
	if batched {
		k, err3 = strconv.ParseInt(c, 10, 64)
	}
	return tokenKey{ms, n, k}, err1 == nil && err2 == nil && err3 == nil && ms >= 0 && n >= 0 && k >= 0
}

func (k tokenKey) lessEq(o tokenKey) bool {
	if k.ms != o.ms {
		return k.ms < o.ms
	}
	if k.n != o.n {
		return k.n < o.n
	}
	return k.k <= o.k
}

// String is the token's form: "MS-N", or "MS-N.K" for a batched one.
func (k tokenKey) String() string {
	if k.k == 0 {
		return fmt.Sprintf("%d-%d", k.ms, k.n)
	}
	return fmt.Sprintf("%d-%d.%d", k.ms, k.n, k.k)
}

// seen reports whether tok was started or settled here.
func (m *tokenMemory) seen(tok string) bool { return m.entries[tok] != nil }

// get returns tok's memo, nil if not remembered.
func (m *tokenMemory) get(tok string) *memo { return m.entries[tok] }

// start records tok as started (or settled) now on slot (identity#index),
// raising the slot's high-water token.
func (m *tokenMemory) start(tok, slot string, now time.Time) {
	if m.entries[tok] == nil {
		m.entries[tok] = &memo{at: now}
		m.order = append(m.order, tok)
	}
	if k, ok := parseToken(tok); ok && slot != "" {
		if h, had := m.high[slot]; !had || h.lessEq(k) {
			m.high[slot] = k
		}
	}
}

// finish records tok's outcome.
func (m *tokenMemory) finish(f *finished) {
	if e := m.entries[f.token]; e != nil {
		c := *f
		e.outcome = &c
	}
}

// reported records that the store acknowledged tok's report at t.
func (m *tokenMemory) reported(tok string, t time.Time) {
	if e := m.entries[tok]; e != nil {
		e.reported = t
	}
}

// predates reports whether tok is at or below the highest token started on
// slot (and is not that token itself): an assignment issued before one
// this worker already ran there.
func (m *tokenMemory) predates(tok, slot string) (bool, tokenKey) {
	k, ok := parseToken(tok)
	h, had := m.high[slot]
	if !ok || !had {
		return false, tokenKey{}
	}
	return k.lessEq(h), h
}

// prune forgets tokens older than keep, then the oldest beyond max, except
// those busy(tok) says are still in flight; and the high-water marks of
// identities other than identity.
func (m *tokenMemory) prune(now time.Time, identity string, busy func(tok string) bool) {
	kept := m.order[:0]
	over := len(m.entries) - m.max
	for _, tok := range m.order {
		e := m.entries[tok]
		if e == nil {
			continue // forgotten
		}
		if !busy(tok) && (now.Sub(e.at) > m.keep || over > 0) {
			delete(m.entries, tok)
			over--
			continue
		}
		kept = append(kept, tok)
	}
	clear(m.order[len(kept):])
	m.order = kept
	for slot := range m.high {
		if !strings.HasPrefix(slot, identity+"#") {
			delete(m.high, slot)
		}
	}
}

func slotKey(identity string, index int) string { return identity + "#" + strconv.Itoa(index) }
