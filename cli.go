package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// The command line's forgiving parts: what urfave/cli v2 does not do by
// itself for a program whose default action is to serve.

// unknownCommand is the root action's answer to an argument: the default
// action (serve) takes none, so it was meant as a command.
func unknownCommand(c *cli.Context) error {
	name := c.Args().First()
	msg := fmt.Sprintf("mcp-mux: unknown command %q", name)
	if cli.SuggestCommand != nil {
		if s := cli.SuggestCommand(c.App.Commands, name); s != "" {
			msg += ". " + s
		}
	}
	return cli.Exit(msg+"\nRun 'mcp-mux --help' for the commands.", 1)
}

// usageError reports a flag mistake on stderr, with the nearest flag,
// instead of urfave's usage dump to the app's Writer (stdout, which
// carries the protocol when serving).
func usageError(c *cli.Context, err error, isSubcommand bool) error {
	where := "mcp-mux"
	if isSubcommand && c.Command != nil {
		where += " " + c.Command.Name
	}
	msg := fmt.Sprintf("%s: %v", where, err)
	const undefined = "flag provided but not defined: "
	if name, ok := strings.CutPrefix(err.Error(), undefined); ok && cli.SuggestFlag != nil && c.Command != nil {
		if s := cli.SuggestFlag(c.Command.Flags, strings.TrimLeft(name, "-"), false); s != "" {
			msg += ". " + fmt.Sprintf(cli.SuggestDidYouMeanTemplate, s)
		}
	}
	return cli.Exit(fmt.Sprintf("%s\nRun '%s --help' for usage.", msg, where), 1)
}

// givenConfig is --config wherever it was given: after the command (which
// wins) or before it. Each command has the flag too, so c.String would
// find the command's own, empty, before the app's.
func givenConfig(c *cli.Context) string {
	for _, x := range c.Lineage() {
		if v := x.String("config"); v != "" {
			return v
		}
	}
	return ""
}

// checkFile is the config check should read: its FILE argument or
// --config (the same file if both).
func checkFile(c *cli.Context) (string, error) {
	flag := givenConfig(c)
	switch c.NArg() {
	case 0:
		return flag, nil
	case 1:
	default:
		return "", cli.Exit(fmt.Sprintf("mcp-mux check: takes one config file, got %d arguments: %s", c.NArg(), strings.Join(c.Args().Slice(), " ")), 1)
	}
	file := c.Args().First()
	if flag != "" && !sameFile(flag, file) {
		return "", cli.Exit(fmt.Sprintf("mcp-mux check: two config files given, %s and --config %s: give one", file, flag), 1)
	}
	return file, nil
}

func sameFile(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// flagsFirst moves the flags typed after a command's arguments
// (`mcp-mux check FILE --connect`) before them: urfave/cli v2 stops
// reading flags at a command's first argument, and would take --connect
// for a second file. After "--" nothing moves; nor does a completion
// request (--generate-bash-completion must stay last).
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 2 || slices.Contains(args, "--") || args[len(args)-1] == "--generate-bash-completion" {
		return args
	}
	// The command is the first argument that is not a global flag or the
	// value of one.
	i := 1
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if takesValue(app.Flags, args[i]) {
			i++
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	cmd := app.Command(args[i])
	if cmd == nil {
		return args
	}
	var flags, rest []string
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		if !strings.HasPrefix(a, "-") || a == "-" {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		if takesValue(cmd.Flags, a) && j+1 < len(args) {
			j++
			flags = append(flags, args[j])
		}
	}
	out := append(slices.Clone(args[:i+1]), flags...)
	return append(out, rest...)
}

// takesValue reports whether arg (-name or --name, without =value) is one
// of flags that takes its value from the next argument.
func takesValue(flags []cli.Flag, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	if strings.Contains(name, "=") {
		return false
	}
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			if v, ok := f.(cli.DocGenerationFlag); ok {
				return v.TakesValue()
			}
		}
	}
	return false
}
