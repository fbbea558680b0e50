package main

import (
	"fmt"

	"github.com/urfave/cli/v2"
)

func init() {
	commands = append(commands, withInterspersed(completionCommand()))
}

// The bash and zsh scripts are urfave/cli's (autocomplete/ in its
// repository), bound to wasmsched: they ask the binary itself for the
// candidates (--generate-bash-completion), so they follow the commands of
// the installed version.
const bashCompletion = `# wasmsched bash completion: source it, or install it as
# /etc/bash_completion.d/wasmsched (needs the bash-completion package)
_wasmsched_complete() {
  local cur words cword
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  if declare -F _init_completion >/dev/null 2>&1; then
    _init_completion -n "=:" || return
  else
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
  fi
  words=("${words[@]:0:$cword}")
  local req
  if [[ "$cur" == "-"* ]]; then
    req="${words[*]} ${cur} --generate-bash-completion"
  else
    req="${words[*]} --generate-bash-completion"
  fi
  COMPREPLY=($(compgen -W "$(eval "${req}" 2>/dev/null)" -- "${cur}"))
}
complete -o bashdefault -o default -o nospace -F _wasmsched_complete wasmsched
`

const zshCompletion = `#compdef wasmsched
# wasmsched zsh completion: put it in a directory of $fpath as _wasmsched
# (or source it after compinit)
_wasmsched() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == "-"* ]]; then
    opts=("${(@f)$(${words[@]:0:#words[@]-1} ${cur} --generate-bash-completion)}")
  else
    opts=("${(@f)$(${words[@]:0:#words[@]-1} --generate-bash-completion)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
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

The bash and zsh scripts ask the binary for candidates, so they follow
upgrades; regenerate the fish one after an upgrade.`,
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
