package storage

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/internal/limits"
)

// cursorVersion prefixes every cursor, so its form can change later.
const cursorVersion = "c1."

// Cursor returns the opaque cursor of the next page of a listing made with
// f: it carries the filter (group, state, labels) and the seq the page starts
// below, so the next page cannot be asked with other filters by mistake.
// "" when p has no next page.
func (p RunPage) Cursor(f RunFilter) string {
	if p.Next <= 0 {
		return ""
	}
	raw := f.Group + "\x00" + string(f.State) + "\x00" + strconv.FormatInt(p.Next, 10)
	if len(f.Labels) > 0 {
		raw += "\x00" + encodeLabels(f.Labels)
	}
	return cursorVersion + base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// ParseCursor decodes a cursor made by RunPage.Cursor into the filter it
// continues (Group, State and Below set; Limit is the caller's). A cursor
// that is not one is ErrInvalid.
func ParseCursor(c string) (RunFilter, error) {
	bad := func(why string) (RunFilter, error) {
		return RunFilter{}, fmt.Errorf("storage: cursor %.40q is not a runs cursor (%s): %w", c, why, ErrInvalid)
	}
	rest, ok := strings.CutPrefix(c, cursorVersion)
	if !ok {
		return bad("unknown version")
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return bad("not base64url")
	}
	parts := strings.Split(string(b), "\x00")
	if len(parts) != 3 && len(parts) != 4 {
		return bad("wrong shape")
	}
	below, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || below <= 0 {
		return bad("bad position")
	}
	f := RunFilter{Group: parts[0], State: State(parts[1]), Below: below}
	if len(parts) == 4 {
		ls, err := limits.NormalizeLabels("labels", decodeLabels(parts[3]), abi.MaxLabels)
		if err != nil || len(ls) == 0 {
			return bad("bad labels")
		}
		f.Labels = ls
	}
	if f.Group != "" {
		if err := limits.ValidateName("group", f.Group); err != nil {
			return bad("bad group")
		}
	}
	switch f.State {
	case "", StateWaiting, StateLaunched, StateRunning, StateStopping,
		StateSucceeded, StateFailed, StateStopped, StateDiscarded:
	default:
		return bad("bad state")
	}
	return f, nil
}
