package storage

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// NewIdentity returns a fresh identity stamp ADDR#START_UNIX_NANO#RANDOM:
// addr is the advertised address, START_UNIX_NANO the time of the call in
// unix nanoseconds and RANDOM 16 hex digits from crypto/rand. Two calls never
// return the same stamp, so a process restarted at the same address is a
// different identity. Call it once per process start.
func NewIdentity(addr string) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("storage: crypto/rand: %v", err)) // never fails on supported platforms
	}
	return addr + "#" + strconv.FormatInt(time.Now().UnixNano(), 10) + "#" + hex.EncodeToString(b[:])
}

// Identity is a parsed identity stamp.
type Identity struct {
	Addr   string    // advertised address (may itself contain '#')
	Start  time.Time // process start
	Random string    // random suffix
}

// ParseIdentity splits a stamp made by NewIdentity.
func ParseIdentity(stamp string) (Identity, error) {
	i := strings.LastIndexByte(stamp, '#')
	if i < 0 {
		return Identity{}, fmt.Errorf("storage: identity %q: want ADDR#START_UNIX_NANO#RANDOM", stamp)
	}
	rest, random := stamp[:i], stamp[i+1:]
	j := strings.LastIndexByte(rest, '#')
	if j < 0 {
		return Identity{}, fmt.Errorf("storage: identity %q: want ADDR#START_UNIX_NANO#RANDOM", stamp)
	}
	addr, start := rest[:j], rest[j+1:]
	ns, err := strconv.ParseInt(start, 10, 64)
	if err != nil || ns <= 0 {
		return Identity{}, fmt.Errorf("storage: identity %q: bad start %q", stamp, start)
	}
	if addr == "" || random == "" {
		return Identity{}, fmt.Errorf("storage: identity %q: empty address or random part", stamp)
	}
	return Identity{Addr: addr, Start: time.Unix(0, ns), Random: random}, nil
}
