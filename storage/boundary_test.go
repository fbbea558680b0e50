package storage_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// redisCommand matches a go-redis command call (client.Cmd(ctx, ...)).
var redisCommand = regexp.MustCompile(`\.(Get|Set|SetNX|Del|Unlink|Exists|Expire|PExpire|TTL|PTTL|Time|Publish|Pipelined|TxPipelined|Do|Eval|EvalSha|Scan|Keys|HGet|HSet|HMGet|HGetAll|HDel|HIncrBy|ZAdd|ZRem|ZCard|ZCount|ZRange|ZRangeWithScores|ZRangeByScore|ZRemRangeByScore|ZScore|SAdd|SRem|SCard|SMembers|SRandMemberN|SIsMember|LPush|RPush|LRange|Incr|ConfigGet|ConfigSet|SlowLogGet|ScriptLoad)\(ctx\b`)

// viaStore matches a command sent on the connection a Store shares
// (st.Redis().Set(ctx, ...)): a file need not import go-redis to do it.
var viaStore = regexp.MustCompile(`\.Redis\(\)\.\w+\(`)

// TestBoundary_redisStaysInStorage: no non-test Go file outside storage/
// (and the tests' own helpers, internal/redistest, which set up servers)
// sends a Redis command itself, whether it imports go-redis or sends on a
// Store's shared connection (Store.Redis()); they call Store methods (the storage
// boundary). Subscriptions (Bus, worker slot events) go through
// Store.Subscribe and only use the returned PubSub.
func TestBoundary_redisStaysInStorage(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "storage", "testdata", "node_modules", ".git", "redistest":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		goRedis := strings.Contains(string(b), `"github.com/redis/go-redis/v9"`)
		for i, line := range strings.Split(string(b), "\n") {
			if viaStore.MatchString(line) || (goRedis && redisCommand.MatchString(line)) {
				t.Errorf("%s:%d: a Redis command outside storage: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
