package config

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// Keeping env values out of config errors: the values of env entries are
// secrets (tokens), and an error message goes to a terminal, a log, an
// agent's UI. Besides the messages of config.go, which name keys and never
// print an env value, three ways out are closed here: the TOML library's
// syntax errors, which quote the file; a token pasted as ${TOKEN}, which
// would be named as an unset variable; and an entry written as
// "NAME=value" = ..., whose key is the value.

// TOML syntax errors, retold without the file's text.
//
// The TOML library's messages quote the text they choke on: for an invalid
// escape, the whole string so far ("expected four hexadecimal digits after
// '\u', but got \"S3CR3T\\u00\\\"\" instead"), for a bad number the number.
// That text may be an env value, that is a secret, and the parse stops
// before any key is known, so it cannot be told whether it is one. So no
// syntax error ever quotes the file: each library message is matched
// against the ones it can produce and retold with only the library's own
// words, plus the column; a message not recognised (a newer library) is
// replaced by a generic one rather than shown.

// syntaxRewrites maps the library's messages (v1.6) to what is shown: what
// is wrong, then the column, then details and hints. Both may use the
// pattern's groups. Patterns are anchored. Compiled on the first syntax
// error, not at every start: at package init they were most of mux's
// init time (2.1-2.5 ms, 493 KB, GODEBUG=inittrace=1).
var syntaxRewrites = sync.OnceValue(func() []syntaxRewrite {
	return []syntaxRewrite{
		// Fixed messages, and ones that quote only key names (never values).
		{regexp.MustCompile(`^(unexpected EOF(?:; expected (?:value|key separator '='|'"'|'"""'|"'"|"'''"))?|` +
			`unexpected end of table name \(table names cannot be empty\)|unexpected table separator \(table names cannot be empty\)|` +
			`unexpected '=': key name appears blank|unexpected '\.': keys cannot start with a '\.'|unexpected '='|unexpected '\.'|` +
			`floats must start with a digit, not '\.'|unexpected comma|unexpected '""""""'|unexpected "''''''"|` +
			`newlines not allowed within inline tables|strings cannot contain newlines|` +
			`files cannot contain NULL bytes; probably using UTF-16; TOML files must be UTF-8)$`), "$1", ""},
		{regexp.MustCompile(`^(Key '[^'\n]*' (?:was already created as a hash|was already created and cannot be used as an array|has already been defined))\.$`), "$1", ""},
		{regexp.MustCompile(`^("[^"\n]*" is not a table)$`), "$1", ""},

		// Escapes in strings: the library quotes the string.
		{regexp.MustCompile(`^expected (two|four|eight) hexadecimal digits after '\\([xuU])', but got .* instead$`),
			"invalid escape sequence in a string", `: \$2 must be followed by $1 hexadecimal digits` + escapeHint},
		{regexp.MustCompile(`^invalid escape(?: in string)?:? '\\.'$`),
			"invalid escape sequence in a string", `: after "\" only b t n f r e " \ x u U may follow` + escapeHint},
		{regexp.MustCompile(`^Escaped character '\\u.*' is not valid UTF-8\.$`),
			"invalid escape sequence in a string", `: \u or \U names a code point that is not a character` + escapeHint},
		{regexp.MustCompile(`^TOML files cannot contain control characters: .*$`),
			"control character in the file", `: inside a "string", write it as an escape such as \u0007`},
		{regexp.MustCompile(`^invalid UTF-8 byte: .*$`), "the file is not valid UTF-8", ""},

		// Structure: the library quotes the character it found.
		{regexp.MustCompile(`^expected a top-level item to end with a newline, comment, or EOF, but got .* instead$`),
			"expected the end of the line (or a # comment) after the value", ""},
		{regexp.MustCompile(`^expected end of table array name delimiter '\]', but got .* instead$`), `expected "]]" to end the [[table]] header`, ""},
		{regexp.MustCompile(`^expected '\.' or '\]' to end table name, but got .* instead$`), "expected '.' or ']' to end the table name", ""},
		{regexp.MustCompile(`^expected value but found .* instead$`),
			"expected a value", `: a "string" in double quotes, a number, true or false, an [array] or an { inline table }`},
		{regexp.MustCompile(`^expected '\.' or '=', but got .* instead$`), "expected '.' or '=' after the key", ""},
		{regexp.MustCompile(`^expected a comma \(','\) or array terminator \('\]'\), but got .*$`), "expected a comma (',') or array terminator (']')", ""},
		{regexp.MustCompile(`^expected a comma or an inline table terminator '\}', but got .* instead$`), "expected a comma or an inline table terminator '}'", ""},

		// Numbers and dates: the library quotes the number (an unquoted PIN is
		// a secret too).
		{regexp.MustCompile(`^Invalid (integer|float) .*: (underscores must be surrounded by digits|cannot have leading zeroes|'\.' must be followed by one or more digits)$`),
			"invalid $1", ": $2" + quoteHint},
		{regexp.MustCompile(`^(?:invalid float: .*|Invalid float value: .*)$`), "invalid float", quoteHint},
		{regexp.MustCompile(`^cannot use sign with non-decimal numbers: .*$`), "cannot use a sign with non-decimal numbers", quoteHint},
		{regexp.MustCompile(`^expected a digit but got .*$`), "expected a digit", quoteHint},
		{regexp.MustCompile(`^not an? (binary|octal|hexadecimal) number: .*$`), "not a $1 number", quoteHint},
		{regexp.MustCompile(`^invalid datetime: .*$`), "invalid date-time", quoteHint},
		{regexp.MustCompile(`^.* is out of (?:range for|the safe) .*$`), "number out of range", quoteHint},
	}
})

type syntaxRewrite struct {
	re           *regexp.Regexp
	what, detail string
}

const (
	escapeHint = `; for a backslash write \\, or use a 'single-quoted' string; the string is not shown, as it may be a secret`
	quoteHint  = `; a string value goes in "double quotes"; the value is not shown, as it may be a secret`
)

// syntaxMessage says what is wrong at pe, column col, without quoting the
// file.
func syntaxMessage(pe toml.ParseError, col int) string {
	what, detail := "the text here is not valid TOML", ""
	for _, r := range syntaxRewrites() {
		if m := r.re.FindStringSubmatchIndex(pe.Message); m != nil {
			what = string(r.re.ExpandString(nil, r.what, pe.Message, m))
			detail = string(r.re.ExpandString(nil, r.detail, pe.Message, m))
			break
		}
	}
	if col > 0 {
		what += fmt.Sprintf(" (column %d)", col)
	}
	return what + detail
}

// Problems with an env entry (see validateBackends).

// message says what is wrong without the value. The name in ${NAME} is
// part of the value, and a token pasted as ${ghp_...} is no variable name:
// a name is shown only if it looks like one (see looksLikeVarName).
func (is envIssue) message() string {
	switch {
	case is.secret != "" && !looksLikeVarName(is.secret):
		// A pasted token in ${secret:...}: not shown.
		return `a "${secret:...}" names a secret that is not stored; the name is not shown because it looks like a secret itself (write ${secret:NAME} and store the value with: mcp-mux secret set NAME)`
	case is.secret != "" && is.secretErr != nil:
		return fmt.Sprintf("${secret:%s} cannot be read: %v", is.secret, is.secretErr)
	case is.secret != "":
		return fmt.Sprintf("${secret:%s} is not stored (store it with: mcp-mux secret set %s)", is.secret, is.secret)
	case is.unset == "":
		return is.malformed
	case looksLikeVarName(is.unset) && !is.store:
		// Where ${secret:NAME} is not read: [mux] http_token, which
		// whoever starts serve --http gives, and oauth_client_id, which
		// the agent gives the mcp-mux it starts.
		return fmt.Sprintf(`${%s} is not set: set it in the environment mcp-mux is started with (by an agent: the "env" of mcp-mux's entry in its MCP config), and start mcp-mux again`, is.unset)
	case looksLikeVarName(is.unset):
		// These values are secrets: a default would put one in the file.
		return unsetSecretMessage(is.unset, is.store)
	}
	return `a "${...}" names a variable that is not set; the name is not shown because it looks like a secret rather than a variable name (write a value as is, without "${...}"; write $$ for a literal "$")`
}

// restartAgent is how a variable given to mcp-mux in the agent's config
// takes effect: mcp-mux reads its environment once, at start.
const restartAgent = "restart the agent"

// unsetSecretMessage is the fix for ${name}, unset, where it holds a
// secret: mcp-mux's environment, or, where ${secret:NAME} is expanded
// (store), the OS secret store.
func unsetSecretMessage(name string, store bool) string {
	msg := fmt.Sprintf(`${%s} is not set: set it in mcp-mux's environment (the "env" of mcp-mux's entry in the agent's MCP config) and %s`, name, restartAgent)
	if store {
		msg += fmt.Sprintf(", or store it with `mcp-mux secret set %s` and write ${secret:%s} in its place", name, name)
	}
	return msg
}

// NeedsAgentRestart reports whether reason, a Backend's Broken, names a
// variable missing from mcp-mux's environment: set in the agent's config,
// it applies when the agent restarts mcp-mux, not when the file is saved.
func NeedsAgentRestart(reason string) bool { return strings.Contains(reason, restartAgent) }

// LooksLikeSecretName reports whether a variable, env entry or flag
// called name holds a secret by its name: TOKEN, SECRET, PASSWORD, KEY,
// AUTH and the like, as a word of it.
func LooksLikeSecretName(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range strings.FieldsFunc(up, func(r rune) bool { return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) {
		switch {
		case strings.Contains(w, "TOKEN"), strings.Contains(w, "SECRET"), strings.Contains(w, "PASSWORD"),
			strings.Contains(w, "PASSWD"), strings.Contains(w, "CREDENTIAL"), strings.Contains(w, "APIKEY"),
			w == "KEY", w == "KEYS", strings.HasSuffix(w, "KEY") && len(w) > 4 && !strings.HasSuffix(w, "MONKEY"),
			w == "AUTH", strings.HasPrefix(w, "AUTHORIZ"), strings.HasPrefix(w, "AUTHENT"),
			w == "PAT", w == "PASS", w == "COOKIE", w == "PRIVATE":
			return true
		}
	}
	return false
}

// looksLikeVarName tells a conventional variable name (GITHUB_TOKEN,
// http_proxy) from a token: tokens mix upper and lower case, or are mostly
// digits (hex), or are long.
func looksLikeVarName(name string) bool {
	var upper, lower bool
	digits := 0
	for _, r := range name {
		switch {
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= '0' && r <= '9':
			digits++
		}
	}
	return len(name) <= 64 && !(upper && lower) && digits*4 <= len(name)
}

// envKeyShown is an env key as it may be shown: a key written as
// NAME=value holds a value, so only the part before "=" is kept.
func envKeyShown(name string) string {
	if i := strings.IndexByte(name, '='); i >= 0 {
		return name[:i] + "=..."
	}
	return name
}
