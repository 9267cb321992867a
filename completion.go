package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

// Shell completion is urfave/cli's own: the app answers
// --generate-bash-completion with the commands and flags that fit, and
// these scripts ask it on TAB. The bash and zsh scripts are urfave's, with
// the program name put in for $PROG and their functions renamed so that
// they do not replace another urfave program's.

// bashCompletion is autocomplete/bash_autocomplete of
// github.com/urfave/cli/v2@v2.27.7. It needs the bash-completion package
// (for _get_comp_words_by_ref), as urfave's does.
const bashCompletion = `#! /bin/bash

# Macs have bash3 for which the bash-completion package doesn't include
# _init_completion. This is a minimal version of that function.
_mcp_mux_init_completion() {
  COMPREPLY=()
  _get_comp_words_by_ref "$@" cur prev words cword
}

_mcp_mux_bash_autocomplete() {
  if [[ "${COMP_WORDS[0]}" != "source" ]]; then
    local cur opts base words
    COMPREPLY=()
    cur="${COMP_WORDS[COMP_CWORD]}"
    if declare -F _init_completion >/dev/null 2>&1; then
      _init_completion -n "=:" || return
    else
      _mcp_mux_init_completion -n "=:" || return
    fi
    words=("${words[@]:0:$cword}")
    if [[ "$cur" == "-"* ]]; then
      requestComp="${words[*]} ${cur} --generate-bash-completion"
    else
      requestComp="${words[*]} --generate-bash-completion"
    fi
    opts=$(eval "${requestComp}" 2>/dev/null)
    COMPREPLY=($(compgen -W "${opts}" -- ${cur}))
    return 0
  fi
}

complete -o bashdefault -o default -o nospace -F _mcp_mux_bash_autocomplete mcp-mux
`

// zshCompletion is autocomplete/zsh_autocomplete of
// github.com/urfave/cli/v2@v2.27.7.
const zshCompletion = `#compdef mcp-mux

_mcp_mux_zsh_autocomplete() {
  local -a opts
  local cur
  cur=${words[-1]}
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

compdef _mcp_mux_zsh_autocomplete mcp-mux
`

var completionShells = []string{"bash", "zsh", "fish"}

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `bash (needs the bash-completion package):  source <(mcp-mux completion bash)
zsh:   source <(mcp-mux completion zsh)   (after compinit)
fish:  mcp-mux completion fish > ~/.config/fish/completions/mcp-mux.fish`,
		BashComplete: func(c *cli.Context) {
			for _, s := range completionShells {
				fmt.Fprintln(c.App.Writer, s)
			}
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("mcp-mux completion: name the shell: bash, zsh or fish", 1)
			}
			switch shell := c.Args().First(); shell {
			case "bash":
				fmt.Fprint(os.Stdout, bashCompletion)
			case "zsh":
				fmt.Fprint(os.Stdout, zshCompletion)
			case "fish":
				script, err := c.App.ToFishCompletion()
				if err != nil {
					return cli.Exit(fmt.Sprintf("mcp-mux completion: fish: %v", err), 1)
				}
				fmt.Fprint(os.Stdout, script)
			default:
				return cli.Exit(fmt.Sprintf("mcp-mux completion: unknown shell %q: bash, zsh or fish", shell), 1)
			}
			return nil
		},
	}
}
