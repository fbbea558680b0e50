package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/wasmsched/wasmsched/abi"
	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/plugins"
	"github.com/wasmsched/wasmsched/storage"
)

func init() {
	commands = append(commands, withInterspersed(completionCommand()))
}

// completeCommand is the hidden first argument the completion scripts call
// the binary with: `wasmsched __complete WORD... CUR` prints the candidates
// for CUR (the word being typed, maybe ""), one a line. It never runs a
// command (urfave's --generate-bash-completion runs the Action when the
// line holds "--", so `run stop r1 --<TAB>` would have stopped r1).
const completeCommand = "__complete"

// The scripts ask the binary for candidates, so they follow the commands
// of the installed version; bash and zsh add the usual space after a
// completed word.
const bashCompletion = `# wasmsched bash completion: source it, or install it as
# /etc/bash_completion.d/wasmsched (needs the bash-completion package)
_wasmsched_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD-1}" "$cur" 2>/dev/null)" -- "$cur"))
}
complete -o default -F _wasmsched_complete wasmsched
`

const zshCompletion = `#compdef wasmsched
# wasmsched zsh completion: put it in a directory of $fpath as _wasmsched
# (or source it after compinit)
_wasmsched() {
  local -a opts
  opts=("${(@f)$(${words[1]} __complete "${(@)words[2,CURRENT-1]}" "${words[CURRENT]}" 2>/dev/null)}")
  if [[ "${opts[1]}" != "" ]]; then
    compadd -a opts
  else
    _files
  fi
}
compdef _wasmsched wasmsched
`

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		ArgsUsage: "bash|zsh|fish",
		Description: `Prints a completion script for your shell. Install it once:

   bash:  wasmsched completion bash | sudo tee /etc/bash_completion.d/wasmsched
          (or add  source <(wasmsched completion bash)  to ~/.bashrc)
   zsh:   wasmsched completion zsh > "${fpath[1]}/_wasmsched"   (then restart zsh)
   fish:  wasmsched completion fish > ~/.config/fish/completions/wasmsched.fish

The bash and zsh scripts ask the binary for candidates (commands, flags,
and the groups, runs and policies of the --redis/--namespace typed or set
in WASMSCHED_REDIS/WASMSCHED_NAMESPACE), so they follow upgrades;
regenerate the fish one after an upgrade (it completes commands and flags).`,
		Action: func(c *cli.Context) error {
			if err := exactArgs(c, 1, "bash|zsh|fish"); err != nil {
				return err
			}
			switch sh := c.Args().First(); sh {
			case "bash":
				fmt.Fprint(c.App.Writer, bashCompletion)
			case "zsh":
				fmt.Fprint(c.App.Writer, zshCompletion)
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				fmt.Fprint(c.App.Writer, s)
			default:
				return usageErrorf("completion: shell %q: want bash, zsh or fish", sh)
			}
			return nil
		},
	}
}

// complete prints the candidates for the last of words (the word being
// typed) after the others: subcommands, flags, flag values, or the
// namespace's groups, runs and policies for a command's arguments.
func complete(ctx context.Context, w io.Writer, app *cli.App, words []string) {
	if len(words) == 0 {
		words = []string{""}
	}
	cur, done := words[len(words)-1], words[:len(words)-1]
	cmds, flags := app.Commands, app.Flags
	var path []string
	prev := ""
	valueOf := map[string]string{} // flag -> its value typed so far
	for i := 0; i < len(done); i++ {
		wd := done[i]
		if strings.HasPrefix(wd, "-") {
			name, val, hasVal := strings.Cut(strings.TrimLeft(wd, "-"), "=")
			if f := findFlag(flags, name); f != nil && takesValue(f) && !hasVal && i+1 < len(done) {
				valueOf[name] = done[i+1]
				i++
			} else if hasVal {
				valueOf[name] = val
			}
			continue
		}
		if c := findCommand(cmds, wd); c != nil {
			path = append(path, c.Name)
			cmds, flags = c.Subcommands, c.Flags
		}
	}
	if n := len(done); n > 0 {
		prev = done[n-1]
	}
	var out []string
	switch {
	case strings.HasPrefix(cur, "-"):
		for _, f := range flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					out = append(out, "--"+n)
				}
			}
		}
	case strings.HasPrefix(prev, "-") && !strings.Contains(prev, "="):
		name := strings.TrimLeft(prev, "-")
		if f := findFlag(flags, name); f != nil && takesValue(f) {
			out = flagValues(ctx, f.Names()[0], valueOf)
			break
		}
		fallthrough
	default:
		for _, c := range cmds {
			if !c.Hidden {
				out = append(out, c.Name)
			}
		}
		if len(cmds) == 0 {
			out = argValues(ctx, strings.Join(path, " "), valueOf)
		}
	}
	for _, s := range out {
		if strings.HasPrefix(s, cur) {
			fmt.Fprintln(w, s)
		}
	}
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func takesValue(f cli.Flag) bool {
	df, ok := f.(cli.DocGenerationFlag)
	return ok && df.TakesValue()
}

// flagValues completes the value of a flag.
func flagValues(ctx context.Context, flag string, typed map[string]string) []string {
	switch flag {
	case flagOutput:
		return []string{"table", "json"}
	case "state":
		return client.States
	case "lang":
		return []string{"go", "rust", "c"}
	case "tz":
		return []string{"UTC", "Europe/London", "Europe/Paris", "America/New_York", "America/Los_Angeles", "Asia/Tokyo"}
	case "group":
		return names(ctx, typed, "groups")
	case "policy": // of a group: serial ones
		return slices.DeleteFunc(names(ctx, typed, "policies"), func(n string) bool {
			bp, builtin := plugins.Lookup(n)
			k := bp.Kind
			return builtin && k != abi.KindSerial
		})
	}
	return nil
}

// argValues completes the arguments of a command (its path).
func argValues(ctx context.Context, path string, typed map[string]string) []string {
	switch path {
	case "submit", "group set", "group show", "group delete", "group snapshot":
		return names(ctx, typed, "groups")
	case "run show", "run stop", "run explain":
		return names(ctx, typed, "runs")
	case "policy push", "policy activate", "policy rollback", "policy delete", "policy list", "policy test":
		return names(ctx, typed, "policies")
	case "schedule set", "schedule show", "schedule pause", "schedule resume", "schedule delete":
		return names(ctx, typed, "schedules")
	case "completion":
		return []string{"bash", "zsh", "fish"}
	}
	return nil
}

// names lists what of the namespace the completion offers: its groups,
// its newest runs or its policies (with the built-ins), read in at most a
// second; nothing when Redis does not answer.
func names(ctx context.Context, typed map[string]string, what string) []string {
	out := []string{}
	if what == "policies" {
		out = plugins.Names()
	}
	url, ns := typed[flagRedis], typed[flagNamespace]
	if ns == "" {
		ns = typed["n"]
	}
	if url == "" {
		url = os.Getenv("WASMSCHED_REDIS")
	}
	if url == "" {
		url = defaultRedisURL
	}
	if ns == "" {
		ns = os.Getenv("WASMSCHED_NAMESPACE")
	}
	if ns == "" {
		ns = defaultNamespace
	}
	t, err := storage.ParseRedisURL(url)
	if err != nil || len(t.Addrs()) == 0 {
		return out
	}
	conn, err := net.DialTimeout("tcp", t.Addrs()[0], 300*time.Millisecond)
	if err != nil {
		return out
	}
	conn.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Redis: url, Namespace: ns})
	if err != nil {
		return out
	}
	defer c.Close()
	switch what {
	case "groups":
		gs, _ := c.Groups(ctx)
		for _, g := range gs {
			out = append(out, g.Name)
		}
	case "runs":
		p, _ := c.List(ctx, client.ListOptions{Limit: client.MaxListLimit})
		for _, r := range p.Runs {
			out = append(out, r.ID)
		}
	case "schedules":
		scs, _ := c.Schedules(ctx)
		for _, sc := range scs {
			out = append(out, sc.Name)
		}
	case "policies":
		ps, _ := c.Policies(ctx)
		for _, p := range ps {
			if !slices.Contains(out, p.Name) {
				out = append(out, p.Name)
			}
		}
	}
	return out
}
