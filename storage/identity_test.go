package storage_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wasmsched/wasmsched/storage"
)

func TestNewIdentityFormat(t *testing.T) {
	before := time.Now()
	id := storage.NewIdentity("10.0.0.7:9090")
	after := time.Now()
	if !regexp.MustCompile(`^10\.0\.0\.7:9090#[0-9]+#[0-9a-f]{16}$`).MatchString(id) {
		t.Fatalf("identity %q: want ADDR#START_UNIX_NANO#RANDOM", id)
	}
	p, err := storage.ParseIdentity(id)
	if err != nil {
		t.Fatal(err)
	}
	if p.Addr != "10.0.0.7:9090" || len(p.Random) != 16 {
		t.Fatalf("parsed %+v", p)
	}
	if p.Start.Before(before.Add(-time.Microsecond)) || p.Start.After(after) {
		t.Fatalf("start %v not within [%v, %v]", p.Start, before, after)
	}
}

func TestNewIdentityUnique(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 10000; i++ {
		id := storage.NewIdentity("host:1")
		if seen[id] {
			t.Fatalf("duplicate identity %q after %d", id, i)
		}
		seen[id] = true
	}
	// Same address, same nanosecond would still differ in the random part.
	a, b := storage.NewIdentity("x:1"), storage.NewIdentity("x:1")
	pa, _ := storage.ParseIdentity(a)
	pb, _ := storage.ParseIdentity(b)
	if pa.Random == pb.Random {
		t.Fatalf("random parts equal: %q %q", a, b)
	}
}

func TestParseIdentityErrors(t *testing.T) {
	for _, s := range []string{"", "addr", "addr#123", "#123#ab", "addr#x#ab", "addr#123#", "addr#-5#ab"} {
		if _, err := storage.ParseIdentity(s); err == nil {
			t.Errorf("storage.ParseIdentity(%q): want error", s)
		}
	}
	// An address containing '#' still parses (the last two fields are fixed).
	p, err := storage.ParseIdentity("a#b#12#ff")
	if err != nil || p.Addr != "a#b" || !strings.EqualFold(p.Random, "ff") {
		t.Fatalf("got %+v, %v", p, err)
	}
}
