package digest

import (
	"crypto/sha256"
	"encoding/hex"
)

// ShortLen is the length of a short version (a sha256 hex prefix).
const ShortLen = 12

// SHA256 returns the lowercase hex sha256 of b.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Short returns the first ShortLen characters of a hex digest (all of a
// shorter one).
func Short(sha string) string { return sha[:min(ShortLen, len(sha))] }
