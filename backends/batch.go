package backends

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Batch files (.cmd, .bat) on Windows: npx, pnpm and every package npm
// installs globally are .cmd shims there ("npx" is npx.cmd). Windows runs
// a batch file only through cmd.exe, whose quoting is not the one
// os/exec writes (CommandLineToArgvW's): given the file, CreateProcess
// starts cmd.exe with a command line cmd reads otherwise, where &, |, <,
// >, ^ and %VAR% outside quotes do what they do in a shell.
//
// So mcp-mux starts cmd.exe itself, with a command line it writes as
// Rust's standard library does since CVE-2024-24576 (and cross-spawn for
// Node's npm shims): every argument with anything but letters, digits and
// #$*+-./:?@\_ in it is put in double quotes, a " in it doubled, so that
// every special character stands between quotes for cmd and for the
// shim's %*, which pastes the arguments into a line cmd reads again; each
// % is followed by %cd:~,% (the empty substring of %CD%), which stops cmd
// from reading %NAME% as a variable. The program behind the shim (node,
// python) then reads its arguments as Windows programs do. A line break
// cannot be passed (cmd ends the command there), nor a NUL: such an
// argument is refused, by name (BatchArgError).

// IsBatchFile reports whether Windows runs path through cmd.exe: its
// extension is .cmd or .bat, in any case.
func IsBatchFile(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".cmd" || ext == ".bat"
}

// BatchArgError is an argument that cannot be passed to a batch file.
type BatchArgError struct {
	Script string // the batch file
	Index  int    // in the backend's args; -1: the script's own path
	Arg    string
	Why    string
}

func (e *BatchArgError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s cannot be run through cmd.exe: its path %s", e.Script, e.Why)
	}
	// Counted from 1, as check names args (#1 is args[0]).
	return fmt.Sprintf("args #%d (%q) cannot be passed to %s, which Windows runs through cmd.exe: it %s; run the program behind it directly (e.g. node and the script's path) to pass it",
		e.Index+1, e.Arg, filepath.Base(e.Script), e.Why)
}

// CheckBatchArgs returns a *BatchArgError for the first of args that
// cannot be passed to the batch file script, or nil.
func CheckBatchArgs(script string, args []string) error {
	if strings.ContainsAny(script, "\"\r\n\x00") {
		return &BatchArgError{Script: script, Index: -1, Arg: script, Why: `has a '"', a line break or a NUL in it`}
	}
	for i, a := range args {
		if why := batchUnsafe(a); why != "" {
			return &BatchArgError{Script: script, Index: i, Arg: a, Why: why}
		}
	}
	return nil
}

func batchUnsafe(a string) string {
	switch {
	case strings.ContainsAny(a, "\r\n"):
		return "has a line break in it, where cmd.exe would end the command"
	case strings.ContainsRune(a, 0):
		return "has a NUL character in it"
	}
	return ""
}

// BatchCommandLine is the command line for cmd.exe that runs the batch
// file script (an absolute path) with args, each of which reaches the
// program behind the shim as it is. It fails as CheckBatchArgs does.
func BatchCommandLine(script string, args []string) (string, error) {
	if err := CheckBatchArgs(script, args); err != nil {
		return "", err
	}
	var b strings.Builder
	// /d: no AutoRun commands from the registry; /e:on: command
	// extensions (which %cd:~,% needs); /v:off: ! is no variable; /s /c:
	// run what is between the first and the last quote, as it is.
	b.WriteString(`cmd.exe /d /e:on /v:off /s /c "`)
	b.WriteByte('"')
	writeBatchText(&b, script)
	b.WriteByte('"')
	for _, a := range args {
		b.WriteByte(' ')
		writeBatchArg(&b, a)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// writeBatchArg writes one argument, quoted unless it is made of safe
// characters only.
func writeBatchArg(b *strings.Builder, a string) {
	quote := a == "" || strings.HasSuffix(a, `\`) || strings.ContainsFunc(a, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(`#$*+-./:?@\_`, r))
	})
	if !quote {
		b.WriteString(a)
		return
	}
	b.WriteByte('"')
	// Backslashes are literal, except before a quote, where (as for
	// CommandLineToArgvW) they are doubled; a " is doubled.
	slashes := 0
	for _, r := range a {
		switch r {
		case '\\':
			slashes++
			b.WriteByte('\\')
			continue
		case '"':
			b.WriteString(strings.Repeat(`\`, slashes))
			b.WriteString(`""`)
		case '%':
			b.WriteString(`%%cd:~,%`)
		default:
			b.WriteRune(r)
		}
		slashes = 0
	}
	b.WriteString(strings.Repeat(`\`, slashes)) // the closing quote follows
	b.WriteByte('"')
}

// writeBatchText writes the script's path, with its % made harmless.
func writeBatchText(b *strings.Builder, s string) {
	b.WriteString(strings.ReplaceAll(s, "%", `%%cd:~,%`))
}
