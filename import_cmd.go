package main

// The import and init commands: starting from the config users already
// have (their agents' MCP servers), or from a commented starter.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mcp-mux/mcp-mux/mux/clientimport"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

func importCommand() *cli.Command {
	return &cli.Command{
		Name:      "import",
		Usage:     "convert the MCP servers of Claude Desktop, Claude Code, Cursor and VS Code into an mcp-mux config",
		ArgsUsage: "[FILE...]",
		Description: "Reads each client config FILE (claude_desktop_config.json, ~/.claude.json, .mcp.json, Cursor's or VS Code's mcp.json);\n" +
			"with no FILE, the clients' default locations for this OS. Writes one commented mcp-mux config (to stdout, or --output),\n" +
			"then prints the block that registers mcp-mux alone in those clients.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the config to `FILE` (default: stdout)"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite the --output file if it exists"},
			&cli.BoolFlag{Name: "apply", Usage: "also move the clients over: add their servers to the config (--output, default: " + displayUserConfigPath() + ") with a profile per client, and replace them in each client's file with one mcp-mux entry, saving each file changed beside it"},
			&cli.BoolFlag{Name: "undo", Usage: "take back what each --apply changed in the clients' files and the config, newest first, keeping what changed since"},
		},
		Action: importAction,
	}
}

func initCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "write a commented starter config (default: " + displayUserConfigPath() + ")",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the starter to `FILE`"},
		},
		Action: initAction,
	}
}

func displayUserConfigPath() string {
	if p := config.UserPath(os.Getenv); p != "" {
		return p
	}
	return "$XDG_CONFIG_HOME/mcp-mux/config.toml"
}

func importAction(c *cli.Context) error {
	stderr := c.App.ErrWriter
	if c.Bool("undo") {
		if c.Bool("apply") || c.NArg() > 0 || c.String("output") != "" || c.Bool("force") {
			return cli.Exit("mcp-mux import: --undo takes no file, --apply, --output or --force: it takes back what each --apply changed, and never what you changed since (each file's copy from before --apply is kept until then)", 1)
		}
		fmt.Fprintln(stderr, "mcp-mux import --undo:")
		return importUndo(stderr)
	}
	exe, temporary := muxCommand()
	if temporary != "" && c.Bool("apply") {
		return cli.Exit("mcp-mux import --apply: nothing was changed: "+temporaryBuildAdvice(exe, temporary)+" with --apply.", 1)
	}
	var read []*readFile
	var settingsDirs []string // where else Claude Code's settings may be: the current directory, as for .mcp.json
	if c.NArg() > 0 {
		for _, path := range c.Args().Slice() {
			f, err := readClientFile(path)
			if err != nil {
				return cli.Exit("mcp-mux import: "+err.Error(), 1)
			}
			read = append(read, f)
		}
	} else {
		wd, _ := os.Getwd()
		if wd != "" {
			settingsDirs = append(settingsDirs, wd)
		}
		fmt.Fprintln(stderr, "mcp-mux import: looking for the MCP clients' config files:")
		for _, loc := range clientimport.Locations(runtime.GOOS, os.Getenv, wd) {
			if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(stderr, "  not found  %s (%s)\n", loc.Path, loc.Client)
				continue
			}
			f, err := readClientFile(loc.Path)
			if err != nil {
				// --apply leaves such a file alone too.
				fmt.Fprintf(stderr, "  not read   %s\n", err)
				continue
			}
			fmt.Fprintf(stderr, "  read       %s (%s): %d server%s\n", loc.Path, f.Client, len(f.Servers), plural(len(f.Servers)))
			read = append(read, f)
		}
	}
	setAsideMuxEntries(stderr, read, exe)
	total, own := 0, 0
	for _, f := range read {
		total += len(f.Servers)
		own += len(f.own)
	}
	if total == 0 && own == 0 {
		return cli.Exit("mcp-mux import: no MCP servers found; pass a client's config file as an argument", 1)
	}
	if c.Bool("apply") {
		// A second run finds only mcp-mux's own entries: nothing to do.
		return importApply(c, read, settingsDirs)
	}
	if total == 0 {
		return cli.Exit("mcp-mux import: no MCP servers found besides mcp-mux's own entries; pass a client's config file as an argument", 1)
	}

	files := make([]*clientimport.File, len(read))
	for i, f := range read {
		files[i] = f.File
	}
	res := clientimport.Render(files)
	out := c.String("output")
	if out != "" {
		abs, err := filepath.Abs(out)
		if err == nil {
			out = abs
		}
		if err := writeNewFile(out, res.TOML, c.Bool("force")); err != nil {
			return cli.Exit("mcp-mux import: "+err.Error(), 1)
		}
		fmt.Fprintf(stderr, "\nwrote %s (readable by you only, as it may hold secrets)\n", out)
	} else if _, err := os.Stdout.Write(res.TOML); err != nil {
		return cli.Exit("mcp-mux import: writing stdout: "+err.Error(), 1)
	}
	reportImport(stderr, res, out)
	printRegistration(stderr, files, out, res.Vars)
	home, _ := os.UserHomeDir()
	printPermissions(stderr, files, res, home, settingsDirs)
	return nil
}

func readClientFile(path string) (*readFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	home, _ := os.UserHomeDir()
	f, err := clientimport.Read(path, data, clientimport.Options{Home: home})
	if err != nil {
		return nil, err
	}
	return &readFile{File: f, data: data}, nil
}

// setAsideMuxEntries moves the entries of the files that launch mcp-mux
// (exe, or a program named mcp-mux) out of their Servers, saying so: such
// an entry is mcp-mux's own, and imported it would run mcp-mux in itself.
func setAsideMuxEntries(w io.Writer, files []*readFile, exe string) {
	for _, f := range files {
		var keep []clientimport.Server
		for _, s := range f.Servers {
			if !clientimport.IsMuxEntry(&s, exe) {
				keep = append(keep, s)
				continue
			}
			f.own = append(f.own, s)
			where := ""
			if s.Project != "" {
				where = " (project " + s.Project + ")"
			}
			fmt.Fprintf(w, "  skipped    %q in %s%s: mcp-mux's own entry (it runs mcp-mux), not imported\n", s.Name, f.Path, where)
		}
		f.Servers = keep
	}
}

// writeNewFile writes data to path, creating its directory, with mode 0600
// (an imported config holds the env values of the clients' files). It
// refuses to replace an existing file unless force; forced, the file is
// replaced whole (written beside it, then renamed).
func writeNewFile(path string, data []byte, force bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists; not overwriting it (pass --force to replace it)", path)
		}
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			os.Remove(path)
			return err
		}
		return f.Close()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".mcp-mux-import-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// reportImport tells what was written and what check thinks of it. Only
// names of backends, keys and variables are printed, never a value.
func reportImport(w io.Writer, res *clientimport.Result, out string) {
	fmt.Fprintf(w, "\n%d backend%s", len(res.Backends), plural(len(res.Backends)))
	if len(res.Disabled) > 0 {
		fmt.Fprintf(w, " (%d disabled)", len(res.Disabled))
	}
	fmt.Fprintf(w, ", %d kept commented out\n", len(res.Commented))
	list := func(title string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(w, "%s:\n  %s\n", title, strings.Join(items, "\n  "))
		}
	}
	list("renamed", res.Renamed)
	list("kept commented out", res.Commented)
	list("imported once, defined more than once", res.Duplicates)
	list("warnings", res.Warnings)
	list(`values that look like secrets, kept in the file (its "Secrets" comment says how to move them to ${VAR})`, res.Secrets)
	if len(res.Vars) > 0 {
		fmt.Fprintf(w, "variables it needs set when mcp-mux runs: %s\n", strings.Join(res.Vars, ", "))
	}

	// What check will say, as the user is told to run it next, each
	// problem as FILE:LINE: key: message with FILE the --output file. A
	// config that went to stdout is in no file yet: its problems are
	// "line N: ..." of what was printed (relative paths in it are taken
	// from the current directory, as for a file saved here).
	cfg, err := config.Parse(out, res.TOML, os.LookupEnv)
	var ce *config.Error
	switch {
	case errors.As(err, &ce):
		where := ""
		if out == "" {
			where = " (lines of the config printed above)"
		}
		fmt.Fprintf(w, "\ncheck finds problems to fix before mcp-mux can serve it%s:\n", where)
		for _, p := range ce.Problems {
			fmt.Fprintln(w, "  "+p.String())
		}
	case err != nil:
		fmt.Fprintln(w, "\ncheck: "+err.Error())
	default:
		fmt.Fprintf(w, "\ncheck: OK (%s)\n", count(len(cfg.Backends), "backend"))
		for _, p := range cfg.Warnings {
			fmt.Fprintln(w, "  warning: "+p.String())
		}
	}
}

// printRegistration prints the block that registers mcp-mux alone in the
// clients whose files were imported.
func printRegistration(w io.Writer, files []*clientimport.File, out string, vars []string) {
	exe, temporary := muxCommand()
	config := out
	if config == "" {
		config = "/path/to/the/saved/output.toml"
	}
	var mcpServers, vscode []string
	for _, f := range files {
		list := &mcpServers
		if f.Client == clientimport.ClientVSCode {
			list = &vscode
		}
		name := f.Client
		if name == clientimport.ClientOther {
			name = "your client"
		}
		if !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
	}
	// Every variable the config refers to (without a default) must be in
	// mcp-mux's environment, or check fails and the agent's mcp-mux does
	// not start the backends that need it: the block sets each, to a
	// placeholder the user replaces, never to a value found here.
	var env map[string]string
	var envFlags []string
	for _, v := range vars {
		if env == nil {
			env = map[string]string{}
		}
		env[v] = envPlaceholder(v)
		envFlags = append(envFlags, "-e", v+"="+envPlaceholder(v))
	}
	entry := registration{Command: exe, Args: []string{"-c", config}, Env: env}
	name := muxServerName
	fmt.Fprintln(w, "\nNext, register mcp-mux alone in place of the servers it now runs (remove them from the client's config, or they run twice).")
	if out == "" {
		fmt.Fprintln(w, "The config went to stdout: put the path of the file you saved it in after \"-c\" (with --output FILE this is filled in).")
	}
	if temporary != "" {
		fmt.Fprintf(w, "Warning: %s, and use its path in the block.\n", temporaryBuildAdvice(exe, temporary))
	}
	if len(mcpServers) > 0 {
		fmt.Fprintf(w, "\n%s (\"mcpServers\"):\n%s\n", strings.Join(mcpServers, ", "), indentJSON(map[string]any{"mcpServers": map[string]any{name: entry}}))
		if slices.Contains(mcpServers, clientimport.ClientClaudeCode) {
			// The name before -e: -e takes every word up to the next option.
			cmd := append([]string{"claude", "mcp", "add", "--scope", "user", name}, envFlags...)
			cmd = append(cmd, "--", shellArg(exe), "-c", shellArg(config))
			fmt.Fprintf(w, "Claude Code can also add it with: %s\n", strings.Join(cmd, " "))
		}
	}
	if len(vscode) > 0 {
		vs := registration{Type: "stdio", Command: exe, Args: []string{"-c", config}, Env: env}
		fmt.Fprintf(w, "\nVS Code (\"servers\", in its mcp.json):\n%s\n", indentJSON(map[string]any{"servers": map[string]any{name: vs}}))
	}
	if len(vars) > 0 {
		fmt.Fprintf(w, "\nThe config refers to %s: mcp-mux reads them from its environment. Replace each placeholder (%s) with its value before you paste the block or run the command.\n",
			strings.Join(vars, ", "), envPlaceholder(vars[0]))
		if len(vscode) > 0 {
			fmt.Fprintln(w, `In VS Code a value may stay "${input:ID}" (keep its "inputs") or be "${env:NAME}".`)
		}
	}
}

// muxServerName is the name under which the printed blocks register
// mcp-mux: in Claude Code, its tools are mcp__mcp-mux__....
const muxServerName = "mcp-mux"

// printPermissions tells a Claude Code user what becomes of their
// permission rules for the imported servers, whose tools get new names
// through mcp-mux: each rule found in Claude Code's settings files with the
// rule that replaces it, or, when there is none, how a rule is rewritten;
// and how to keep the names short. It says nothing when no Claude Code
// server was imported.
func printPermissions(w io.Writer, files []*clientimport.File, res *clientimport.Result, home string, dirs []string) {
	servers := clientimport.ClaudeCodeServers(res)
	if len(servers) == 0 {
		return
	}
	mux := muxServerName
	fmt.Fprintf(w, "\nClaude Code names a server's tools mcp__SERVER__TOOL; through mcp-mux they are mcp__%s__BACKEND__TOOL, so the permission rules (\"permissions\" in its settings.json) written for the imported servers no longer match them.\n", mux)
	found := false
	for _, path := range clientimport.ClaudeCodeSettings(home, files, dirs...) {
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var rules []clientimport.PermissionRule
		if err == nil {
			rules, err = clientimport.ReadPermissionRules(path, data)
		}
		if err != nil {
			fmt.Fprintf(w, "Not read: %s\n", pathError(path, err))
			continue
		}
		carried := clientimport.CarryOver(rules, clientimport.SettingsProject(path, home), servers, mux)
		if len(carried) == 0 {
			continue
		}
		if !found {
			fmt.Fprintln(w, "Add these rules to the same lists to carry them over:")
			found = true
		}
		fmt.Fprintf(w, "  %s:\n", path)
		for _, c := range carried {
			fmt.Fprintf(w, "    %-5s  %s → %s\n", c.List, c.Rule, strings.Join(c.New, ", "))
		}
	}
	if !found {
		fmt.Fprintf(w, "No rule for them was found in Claude Code's settings (%s, and each project's .claude/settings.json and .claude/settings.local.json). One for a tool, or a whole server, becomes:\n",
			filepath.Join(home, ".claude", "settings.json"))
		var shown []string
		for _, s := range servers {
			old := "mcp__" + clientimport.ClaudeCodeToolName(s.Name)
			line := fmt.Sprintf("%s__TOOL → %s, %s → %s", old, clientimport.MuxToolRule(mux, s.Backend, "TOOL"), old, clientimport.MuxToolRule(mux, s.Backend, "*"))
			if s.Project != "" {
				line += " (project " + s.Project + ")"
			}
			if !slices.Contains(shown, line) {
				shown = append(shown, line)
				fmt.Fprintln(w, "  "+line)
			}
		}
	}
	short := strings.ToLower(servers[0].Backend[:1])
	fmt.Fprintf(w, "To keep the names short, give a [[backend]] a shorter prefix (by default, its name) and write the rules with it: prefix = %q gives %s; prefix = \"\" gives %s, but then no rule names that backend's tools alone (mcp__%s is all of mcp-mux's).\n",
		short, clientimport.MuxToolRule(mux, short, "TOOL"), "mcp__"+mux+"__TOOL", mux)
}

// pathError is err about path, said once: without the *fs.PathError's own
// copy of the path.
func pathError(path string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if strings.HasPrefix(err.Error(), path) {
		return err.Error()
	}
	return path + ": " + err.Error()
}

// envPlaceholder stands for the value of the variable name in the block
// import prints: plainly not a value, and safe in a shell word and in
// JSON as it is (a variable name is letters, digits and "_").
func envPlaceholder(name string) string {
	return "YOUR_" + name
}

// registration is mcp-mux's entry in a client's config, its keys in the
// order people write them.
type registration struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

func indentJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// shellArg quotes s for the shell a user of this system types into when
// needed: a POSIX shell, or on Windows PowerShell or cmd.exe, which both
// take a "double-quoted" word and a backslash as it is (cmd.exe would keep
// POSIX 'single quotes' in the word).
func shellArg(s string) string {
	safe := "/._-+:=@%,"
	if runtime.GOOS == "windows" {
		safe += `\`
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(safe, r))
	}) < 0 {
		return s
	}
	if runtime.GOOS == "windows" {
		return `"` + s + `"` // a path has no " in it on Windows
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func initAction(c *cli.Context) error {
	stderr := c.App.ErrWriter
	path := c.String("output")
	if path == "" {
		path = config.UserPath(os.Getenv)
		if path == "" {
			return cli.Exit("mcp-mux init: neither XDG_CONFIG_HOME nor HOME is set, so there is no default location: pass --output FILE", 1)
		}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	backend, found := clientimport.ChooseStarter(nil)
	if err := writeNewFile(path, clientimport.StarterConfig(backend), false); err != nil {
		if errors.Is(err, fs.ErrExist) || strings.Contains(err.Error(), "already exists") {
			return cli.Exit(fmt.Sprintf("mcp-mux init: %s already exists; not overwriting it (edit it, or pass --output with another file)", path), 1)
		}
		return cli.Exit("mcp-mux init: "+err.Error(), 1)
	}
	exe, temporary := muxCommand()
	fmt.Fprintf(stderr, "wrote %s: a commented starter config with one backend, %q (%s %s).\n", path, backend.Name, backend.Command, strings.Join(backend.Args, " "))
	if !found {
		fmt.Fprintf(stderr, "Neither uvx nor npx is on PATH: install Node.js (for npx) or replace that backend, or check will say %q is not found.\n", backend.Command)
	}
	reg := indentJSON(map[string]any{"mcpServers": map[string]any{"mcp-mux": registration{Command: exe, Args: []string{"-c", path}}}})
	fmt.Fprintf(stderr, `
Next:
  1. Already have MCP servers in Claude Desktop, Claude Code, Cursor or VS Code?
     mcp-mux import --output FILE converts them (then use that file instead).
  2. Add your servers to it as [[backend]] sections.
  3. Check it: mcp-mux check --config %s (--connect also starts each backend).
  4. Register mcp-mux alone in your agent, e.g. in claude_desktop_config.json:
%s
`, shellArg(path), reg)
	if temporary != "" {
		fmt.Fprintf(stderr, "\nWarning: %s, and use its path in step 4.\n", temporaryBuildAdvice(exe, temporary))
	}
	return nil
}
