package backends

import (
	"errors"
	"strings"
	"testing"
)

// TestBatchCommandLineQuotesForCmd: the command line cmd.exe gets for a
// batch file puts every special character between quotes, doubles a
// quote, doubles backslashes only before a quote, and defuses %.
func TestBatchCommandLineQuotesForCmd(t *testing.T) {
	const head = `cmd.exe /d /e:on /v:off /s /c ""C:\nodejs\npx.cmd"`
	for _, tt := range []struct {
		args []string
		want string // after head
	}{
		{nil, ``},
		{[]string{"-y", "@modelcontextprotocol/server-github"}, ` -y @modelcontextprotocol/server-github`},
		{[]string{"C:/Users/me/notes", `C:\Users\me\notes`}, ` C:/Users/me/notes C:\Users\me\notes`},
		{[]string{"", "two words", "tab\there"}, ` "" "two words" "tab	here"`},
		{[]string{`a"b`, `"q"`}, ` "a""b" """q"""`},
		{[]string{"&calc", "a|b", "<x>", "^c", "(p)", "a,b;c=d", "!v!"}, ` "&calc" "a|b" "<x>" "^c" "(p)" "a,b;c=d" "!v!"`},
		{[]string{"%PATH%", "100%"}, ` "%%cd:~,%PATH%%cd:~,%" "100%%cd:~,%"`},
		{[]string{`C:\dir\`, `C:\Program Files\x\`}, ` "C:\dir\\" "C:\Program Files\x\\"`},
		{[]string{`a\"b`, `a\\"b`}, ` "a\\""b" "a\\\\""b"`},
		{[]string{"été", "日本"}, ` "été" "日本"`},
	} {
		got, err := BatchCommandLine(`C:\nodejs\npx.cmd`, tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if want := head + tt.want + `"`; got != want {
			t.Errorf("%q:\n got %s\nwant %s", tt.args, got, want)
		}
	}
	got, _ := BatchCommandLine(`C:\100%\x.cmd`, nil)
	if want := `cmd.exe /d /e:on /v:off /s /c ""C:\100%%cd:~,%\x.cmd""`; got != want {
		t.Errorf("script with %%:\n got %s\nwant %s", got, want)
	}
}

// TestBatchArgumentsThatCannotBePassedAreNamed: a line break (cmd ends
// the command there) or a NUL is refused, naming the argument.
func TestBatchArgumentsThatCannotBePassedAreNamed(t *testing.T) {
	for _, tt := range []struct {
		args  []string
		index int
		why   string
	}{
		{[]string{"ok", "line\nbreak"}, 1, "line break"},
		{[]string{"cr\r"}, 0, "line break"},
		{[]string{"a", "b", "nul\x00"}, 2, "NUL"},
	} {
		_, err := BatchCommandLine(`C:\nodejs\npx.cmd`, tt.args)
		var be *BatchArgError
		if !errors.As(err, &be) || be.Index != tt.index {
			t.Errorf("%q: %v, want args #%d refused", tt.args, err, tt.index+1)
			continue
		}
		msg := err.Error()
		for _, want := range []string{"args #" + string(rune('1'+tt.index)) + " ", "npx.cmd", "cmd.exe", tt.why} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q: %q lacks %q", tt.args, msg, want)
			}
		}
	}
	if !IsBatchFile(`C:\x\NPX.CMD`) || !IsBatchFile("run.bat") || IsBatchFile("node.exe") || IsBatchFile("cmd") {
		t.Error("IsBatchFile: wrong for .CMD, .bat, .exe or no extension")
	}
}
