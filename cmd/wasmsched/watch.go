package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/storage"
)

// watchRuns is `runs --watch`: it subscribes first (so no change between
// the listing and the watch is lost), prints the page, then prints every
// run an event names that matches f, re-read from the store (the event is
// a hint; the record is the truth), until the context ends.
func watchRuns(c *cli.Context, st *storage.Store, f storage.RunFilter) error {
	ctx := c.Context
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	w, err := st.WatchRuns(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	out := newRunPrinter(c.App.Writer, format == "json")
	page := func() error {
		rs, _, err := listRuns(ctx, st, f)
		if err != nil {
			return err
		}
		// oldest first, so the newest ends up last, where changes follow
		for i := len(rs) - 1; i >= 0; i-- {
			out.print(rs[i])
		}
		return out.flush()
	}
	if err := page(); err != nil {
		return err
	}
	for {
		var b storage.RunBatch
		select {
		case <-ctx.Done():
			return nil // interrupted: the watch's normal end
		case v, ok := <-w.C:
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("run watch ended")
			}
			b = v
		}
		if b.Missed {
			fmt.Fprintln(c.App.ErrWriter, "wasmsched: the watch missed events (it fell behind or reconnected); listing the page again")
			if err := page(); err != nil {
				return watchErr(ctx, err)
			}
		}
		ids := make([]string, 0, len(b.Events))
		for _, ev := range b.Events {
			if (f.Group == "" || ev.Group == f.Group) && (f.State == "" || ev.State == f.State) {
				ids = append(ids, ev.Run)
			}
		}
		for len(ids) > 0 {
			n := min(len(ids), storage.MaxGetRuns)
			rs, err := st.GetRuns(ctx, ids[:n])
			if err != nil {
				return watchErr(ctx, err)
			}
			ids = ids[n:]
			for _, r := range rs {
				v := toRunJSON(r)
				if f.State != "" && storage.State(v.State) != f.State {
					continue // moved on since the event
				}
				out.print(v)
			}
		}
		if err := out.flush(); err != nil {
			return err
		}
	}
}

// watchErr ends a watch quietly when it was interrupted mid-read.
func watchErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// runPrinter prints runs one per line: table rows under one header, or
// compact JSON lines.
type runPrinter struct {
	json   bool
	w      io.Writer
	tw     *tabwriter.Writer
	enc    *json.Encoder
	header bool
}

func newRunPrinter(w io.Writer, asJSON bool) *runPrinter {
	return &runPrinter{json: asJSON, w: w, tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0), enc: json.NewEncoder(w)}
}

func (p *runPrinter) print(r runJSON) {
	if p.json {
		_ = p.enc.Encode(r)
		return
	}
	if !p.header {
		runsTable(p.tw, nil) // the header line
		p.header = true
	}
	runRow(p.tw, r)
}

func (p *runPrinter) flush() error {
	if p.json {
		return nil
	}
	return p.tw.Flush()
}
