package main

import (
	"encoding/json"
	"errors"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/storage"
)

// Global flag names and defaults.
const (
	flagRedis     = "redis"
	flagNamespace = "namespace"
	flagOutput    = "output"

	defaultRedisURL  = "redis://127.0.0.1:6379/0"
	defaultNamespace = "default"
)

// globalFlags returns fresh flag values each call: urfave/cli records
// "set" state on the flag object, so commands must not share instances.
// Only the app-level copy reads the environment (withEnv): a copy on a
// command that read it too would look "set" and hide a flag typed before
// the command name.
func globalFlags(withEnv bool) []cli.Flag {
	env := func(name string) []string {
		if withEnv {
			return []string{name}
		}
		return nil
	}
	return []cli.Flag{
		&cli.StringFlag{
			Name:    flagRedis,
			Usage:   "Redis `URL`: redis://[user:pass@]host:port/db (rediss:// = TLS); cluster: h1:p1,h2:p2 or redis+cluster://h1:p1,h2:p2; sentinel: redis+sentinel://s1:p1[,s2:p2]/MASTER[/db] (see docs/operations.md)",
			EnvVars: env("WASMSCHED_REDIS"),
			Value:   defaultRedisURL,
		},
		&cli.StringFlag{
			Name:    flagNamespace,
			Aliases: []string{"n"},
			Usage:   "namespace: the unit of atomicity and leadership",
			EnvVars: env("WASMSCHED_NAMESPACE"),
			Value:   defaultNamespace,
		},
		&cli.StringFlag{
			Name:    flagOutput,
			Aliases: []string{"o"},
			Usage:   "output format: table or json",
			Value:   "table",
		},
	}
}

// globalString reads a global flag wherever the user typed it: typed after
// the command name wins, then typed before it, then the environment (both
// seen on the app-level flag), then the default.
func globalString(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if ctx.Command == nil && ctx.App == nil {
			continue
		}
		if slices.Contains(ctx.LocalFlagNames(), name) {
			return ctx.String(name)
		}
	}
	return c.String(name)
}

// outputFormat returns "table" or "json", or a usage error.
func outputFormat(c *cli.Context) (string, error) {
	switch f := globalString(c, flagOutput); f {
	case "table", "json":
		return f, nil
	default:
		return "", usageErrorf("-o %q: want table or json", f)
	}
}

// render writes v as indented JSON with -o json, or calls table with a
// tabwriter otherwise.
func render(c *cli.Context, v any, table func(w io.Writer)) error {
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	out := c.App.Writer
	if format == "json" {
		return writeJSON(out, v)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// exactArgs checks the positional argument count.
func exactArgs(c *cli.Context, n int, names string) error {
	if c.NArg() != n {
		return usageErrorf("%s: want %d argument(s) (%s), got %d", c.Command.Name, n, names, c.NArg())
	}
	return nil
}

// openStore connects to --redis and opens --namespace. The caller closes
// the returned client.
func openStore(c *cli.Context) (*storage.Store, func(), error) {
	ns := globalString(c, flagNamespace)
	if err := limits.ValidateName("namespace", ns); err != nil {
		return nil, nil, asUsage(err)
	}
	rdb, closeFn, err := openClient(c)
	if err != nil {
		return nil, nil, err
	}
	st, err := storage.New(rdb, ns)
	if err != nil {
		closeFn()
		return nil, nil, asUsage(err)
	}
	return st, closeFn, nil
}

// openNamespace is how a command opens --namespace on --redis: the store
// and its client view on one connection. With mustExist, a namespace
// nothing was ever written in is a usage error (a typo in --namespace). The
// caller closes.
func openNamespace(c *cli.Context, mustExist bool) (*storage.Store, *client.Client, func(), error) {
	st, closeFn, err := openStore(c)
	if err != nil {
		return nil, nil, nil, err
	}
	if mustExist {
		if err := requireNamespace(c.Context, st); err != nil {
			closeFn()
			return nil, nil, nil, err
		}
	}
	return st, clientOf(st), closeFn, nil
}

// clientOf is the client view of st (records; the same connection).
func clientOf(st *storage.Store) *client.Client {
	c, err := client.NewFromRedis(st.Redis(), st.Namespace())
	if err != nil {
		panic(err) // st's namespace is valid
	}
	return c
}

// openClient connects to --redis (single node, Sentinel or Cluster).
func openClient(c *cli.Context) (redis.UniversalClient, func(), error) {
	rdb, err := storage.Connect(c.Context, globalString(c, flagRedis))
	if err != nil {
		if errors.Is(err, errs.ErrInvalid) {
			return nil, nil, asUsage(err) // malformed --redis: exit 2
		}
		return nil, nil, err
	}
	return rdb, func() { rdb.Close() }, nil
}
