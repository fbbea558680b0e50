package sdk

import (
	"strconv"
	"time"

	"github.com/wasmsched/wasmsched/abi"
)

// Reading a group's policy parameters (ABI v4, `group set --param`). A
// parameter that is unset or does not parse gives def: a policy decides
// on with its default rather than failing every decision of the group
// (say the defaults in the policy's documentation).

// ParamInt returns parameter name as an integer, or def.
func ParamInt(s *abi.SerialSnapshot, name string, def int) int {
	if v := s.Param(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// ParamDuration returns parameter name as a duration ("2s", "1m30s"; a
// bare number is milliseconds), or def.
func ParamDuration(s *abi.SerialSnapshot, name string, def time.Duration) time.Duration {
	v := s.Param(name)
	if v == "" {
		return def
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	return def
}

// ParamString returns parameter name, or def when unset.
func ParamString(s *abi.SerialSnapshot, name, def string) string {
	if v := s.Param(name); v != "" {
		return v
	}
	return def
}

// LaunchesSince counts the group's recent launches at or after unix ms t
// (s.Launches, oldest first), and returns the time of the oldest of them
// (0 when none).
func LaunchesSince(s *abi.SerialSnapshot, t int64) (n int, oldest int64) {
	for i := len(s.Launches) - 1; i >= 0 && s.Launches[i].At >= t; i-- {
		n, oldest = n+1, s.Launches[i].At
	}
	return n, oldest
}

// Free returns how many runs s's group may launch now: max_active less
// its active runs that are not STOPPING (never below 0).
func Free(s *abi.SerialSnapshot) int {
	n := int(s.EffectiveMaxActive())
	for i := range s.Active {
		if s.Active[i].State != abi.StateStopping {
			n--
		}
	}
	return max(n, 0)
}
