// The GOMAXPROCS updater (Go 1.25+) wakes an idle process every second to
// re-read its cgroup CPU limit; a serve leading an idle namespace wakes
// about 2.5 times a second in all, so it is a third of the idle cost. The
// limit is still read once at start (RATIONALE.md, "Why no GOMAXPROCS updater?").
//
//go:debug updatemaxprocs=0
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/urfave/cli/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmsched/wasmsched/cmd/wasmsched/internal/badinput"
	"github.com/wasmsched/wasmsched/internal/errs"
	"github.com/wasmsched/wasmsched/internal/tracing"
)

// Exit codes, documented in --help and docs: 0 success, 1 a failed check
// (for example a failing policy test) or a runtime failure (Redis
// unreachable), 2 bad usage or bad input.
const (
	exitOK      = 0
	exitCheck   = 1
	exitUsage   = 2
	exitFailure = 1
)

// commands is filled by the init functions of the command-group files
// (one file per group: serve.go, leader.go, policy.go, ...), so adding a
// command group never touches this file.
var commands []*cli.Command

// tracerProvider is the OpenTelemetry SDK's provider when the environment
// turns tracing on (nil: off); the leader's decision spans need it given
// (host.EngineConfig.TracerProvider), the client and workers use the
// global one it also is.
var tracerProvider trace.TracerProvider

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
}

// run builds the app and runs it; it returns the process exit code. Tests
// call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// go-redis logs dial failures itself; the error a command returns
	// already says what failed, so its own lines go to slog at debug.
	redis.SetLogger(redisLogger{})

	// OpenTelemetry, when the OTEL_* environment turns it on (off by
	// default: internal/tracing); its spans are flushed on the way out
	tp, shutdown, err := tracing.FromEnv(ctx, "wasmsched")
	if err != nil {
		fmt.Fprintf(stderr, "wasmsched: %v\n", err)
		return exitUsage
	}
	tracerProvider = tp
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			fmt.Fprintf(stderr, "wasmsched: tracing: %v\n", err)
		}
	}()

	app := newApp(stdout, stderr)
	if len(args) > 1 && args[1] == completeCommand { // the completion scripts' question (completion.go)
		complete(ctx, stdout, app, args[2:])
		return exitOK
	}
	var unknown string
	app.CommandNotFound = func(_ *cli.Context, name string) { unknown = name }
	err = app.RunContext(ctx, args)
	if unknown != "" {
		fmt.Fprintf(stderr, "wasmsched: unknown command %q (see wasmsched --help)\n", unknown)
		return exitUsage
	}
	if err == nil {
		return exitOK
	}
	code := exitCodeOf(err)
	fmt.Fprintf(stderr, "wasmsched: %s\n", userMessage(err))
	return code
}

// userMessage is err's message in the user's terms (errs.UserMessage).
func userMessage(err error) string { return errs.UserMessage(err) }

func init() {
	// --version prints what `wasmsched version` does, not "wasmsched
	// version wasmsched ...".
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, c.App.Version) }
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		// a --label or --param value may hold a comma: each flag is one pair
		DisableSliceFlagSeparator: true,
		Name:                      "wasmsched",
		Usage:                     "a WebAssembly-pluggable scheduling policy engine",
		Description: `wasmsched keeps worker slots and serial runs in Redis, elects one leader per
namespace, and asks sandboxed wasm policies (wait, discard, priority, reuse or
your own) what to launch, discard, stop and reuse.

Global flags (--redis, --namespace, -o) may be given before or after the
command name. Exit codes: 0 success; 1 a failed check or a runtime failure
(e.g. Redis unreachable); 2 bad usage or bad input (the message names what
was wrong).`,
		Version:                buildVersion().String(),
		Writer:                 stdout,
		ErrWriter:              stderr,
		Flags:                  globalFlags(true),
		Commands:               withGlobalFlags(commands),
		EnableBashCompletion:   true,
		UseShortOptionHandling: false,
		HideHelpCommand:        false,
		// Errors are printed once by run; urfave must not print or exit.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageErrorf("%v", err)
		},
	}
	return app
}

// withGlobalFlags appends a fresh copy of the global flags to every leaf
// command so users may type them after the command name too.
func withGlobalFlags(cmds []*cli.Command) []*cli.Command {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			c.OnUsageError = func(ctx *cli.Context, err error, _ bool) error {
				return flagError(ctx, err)
			}
		}
		if len(c.Subcommands) > 0 {
			withGlobalFlags(c.Subcommands)
			if c.Action == nil {
				continue
			}
		} else {
			// A leaf's positional arguments are data: a group, run or
			// schedule named "help" or "h" is a name, not a help alias
			// (urfave gives every command a help subcommand otherwise).
			// --help and -h still show the help.
			c.HideHelpCommand = true
		}
		if !hasFlag(c.Flags, flagRedis) { // idempotent: run may be called again (tests)
			c.Flags = append(c.Flags, globalFlags(false)...)
			before := c.Before
			// Reject a bad -o before the command connects to anything.
			c.Before = func(ctx *cli.Context) error {
				if _, err := outputFormat(ctx); err != nil {
					return err
				}
				if before != nil {
					return before(ctx)
				}
				return nil
			}
		}
	}
	return cmds
}

// flagError is a flag parsing error with where to read the flags.
func flagError(c *cli.Context, err error) error {
	var path []string
	if c != nil {
		for _, ctx := range c.Lineage() {
			if ctx.Command != nil && ctx.Command.Name != "" && ctx.Command.Name != "wasmsched" && (len(path) == 0 || path[0] != ctx.Command.Name) {
				path = append([]string{ctx.Command.Name}, path...)
			}
		}
	}
	return usageErrorf("%s (see %s --help)", longFlags(err.Error()), strings.Join(append([]string{"wasmsched"}, path...), " "))
}

// shortFlag is a flag name as Go's flag package quotes it: one dash.
var shortFlag = regexp.MustCompile(`(flag provided but not defined: |for flag )-([A-Za-z0-9][A-Za-z0-9-]+)`)

// longFlags writes the long flag names in a flag package error as users
// type them: "--group", not "-group" (a one-letter flag keeps its dash).
func longFlags(msg string) string { return shortFlag.ReplaceAllString(msg, "${1}--${2}") }

// listenError is the error of a listener for flag: a malformed or
// impossible address is bad usage (exit 2), a port another process holds is
// a runtime failure (exit 1) that says so.
func listenError(flag string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s: the address is taken (another process listens there): pick another (127.0.0.1:0 picks a free port): %w", flag, err)
	}
	return asUsage(fmt.Errorf("%s: %w", flag, err))
}

// usageError marks bad usage or bad input: exit code 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// asUsage wraps err (if not nil) as a usage error.
func asUsage(err error) error {
	if err == nil {
		return nil
	}
	return &usageError{err: err}
}

// checkFailed marks a check that ran and failed: exit code 1.
type checkFailed struct{ msg string }

func (e *checkFailed) Error() string { return e.msg }

// exitCodeOf is the one map from a command's error to its exit code: 2 for
// what the user can fix by changing the command (a usage error, bad input,
// and the store's refusals: an invalid value, an unknown name, a run in the
// wrong state, a duplicate), 1 for a check that failed, else 1 (Redis down,
// a runtime failure).
func exitCodeOf(err error) int {
	var u *usageError
	var cf *checkFailed
	switch {
	case errors.As(err, &u), errors.Is(err, badinput.Err),
		errors.Is(err, errs.ErrInvalid), errors.Is(err, errs.ErrNotFound),
		errors.Is(err, errs.ErrBadState), errors.Is(err, errs.ErrDuplicate):
		return exitUsage
	case errors.As(err, &cf):
		return exitCheck
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return exitFailure
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// redisLogger sends go-redis's internal log lines to slog at debug level.
type redisLogger struct{}

func (redisLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
