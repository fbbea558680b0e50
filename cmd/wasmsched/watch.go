package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
)

// watchRuns is `runs --watch`: it subscribes first (so no change between
// the listing and the watch is lost), prints the page, then one row per
// state change of a run matching o (the state the change entered, the
// run's record as read right after), until the context ends. When changes
// were lost (the watch fell behind, or its Redis connection dropped and
// came back) it says so on stderr and prints the page again.
func watchRuns(c *cli.Context, cl *client.Client, o client.ListOptions, limit int) error {
	ctx := c.Context
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	w, err := cl.Watch(ctx, client.WatchOptions{Group: o.Group})
	if err != nil {
		return err
	}
	defer w.Close()
	out := &runPrinter{json: format == "json", w: c.App.Writer}
	page := func() error {
		rs, _, err := listRuns(ctx, cl, o, limit)
		if err != nil {
			return err
		}
		out.header()
		// oldest first, so the newest ends up last, where changes follow
		for i := len(rs) - 1; i >= 0; i-- {
			out.print(rs[i], rs[i].State)
		}
		return nil
	}
	if err := page(); err != nil {
		return err
	}
	for {
		var ev client.Event
		select {
		case <-ctx.Done():
			return nil // interrupted: the watch's normal end
		case e, ok := <-w.C:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("run watch ended")
			}
			ev = e
		}
		if ev.Missed {
			fmt.Fprintln(c.App.ErrWriter, "wasmsched: the watch may have missed changes (it fell behind, or its Redis connection dropped and came back); listing the page again")
			if err := page(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			continue
		}
		if o.State != "" && ev.State != o.State {
			continue
		}
		out.print(ev.Run, ev.State)
	}
}

// runPrinter prints runs one per line as they come: rows padded to the
// runs table's column widths under a header, or compact JSON lines (a run
// record, and for a change the state it entered: {"state": ..., "run": ...}).
type runPrinter struct {
	json bool
	w    io.Writer
}

func (p *runPrinter) header() {
	if p.json {
		return
	}
	cells := make([]string, len(runColumns))
	for i, c := range runColumns {
		cells[i] = c.name
	}
	p.row(cells)
}

func (p *runPrinter) print(r client.Run, state string) {
	if p.json {
		_ = json.NewEncoder(p.w).Encode(client.Event{Run: r, State: state})
		return
	}
	p.row(runCells(r, state))
}

func (p *runPrinter) row(cells []string) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteString("  ")
		}
		b.WriteString(c)
		if w := runColumns[i].width; len(c) < w && i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", w-len(c)))
		}
	}
	fmt.Fprintln(p.w, strings.TrimRight(b.String(), " "))
}
