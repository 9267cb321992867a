// Package clientimport turns the agents' own MCP configs into mcp-mux's:
// it reads Claude Desktop, Claude Code, Cursor and VS Code files (read.go,
// vars.go, locations.go), renders them as one commented TOML file
// (render.go), carries Claude Code's permission rules over to the tools'
// names through mcp-mux (permissions.go), and writes init's starter config
// (starter.go).
package clientimport

// Reading the agents' own config files for `mcp-mux import`: Claude
// Desktop's claude_desktop_config.json, Claude Code's ~/.claude.json (its
// top-level servers and the per-project ones under projects.<path>) and
// .mcp.json, Cursor's mcp.json (all under "mcpServers") and VS Code's
// mcp.json (under "servers"). Each server becomes a Server in
// mcp-mux's terms; render.go writes them as TOML. A server with a
// url becomes a remote backend (url, transport, headers).
//
// The clients' variables become mcp-mux's: ${env:NAME} (VS Code, Cursor)
// is ${NAME}; ${NAME} and ${NAME:-default} (Claude Code) are mcp-mux's own
// syntax and stay; ${userHome}, ${workspaceFolder} and the like are
// resolved now; VS Code's ${input:id}, which VS Code asks the user for,
// becomes a variable mcp-mux reads from its environment. Anything else
// cannot be run the same way, and the server is written commented out
// with the reason, never guessed at.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// The clients whose files are read.
const (
	ClientClaudeDesktop = "Claude Desktop"
	ClientClaudeCode    = "Claude Code"
	ClientCursor        = "Cursor"
	ClientVSCode        = "VS Code"
	ClientOther         = "mcpServers JSON"
)

// File is what was found in one client config file.
type File struct {
	Path    string // absolute
	Client  string // one of the Client* constants
	Project string // the project directory of a project-level file, "" for a user-level one
	Servers []Server
	Notes   []string // about the file as a whole, for the TOML's comments
}

// Server is one server entry of a client's file in mcp-mux's terms.
type Server struct {
	Name    string // as written in the client's file
	Project string // the project of a per-project server of ~/.claude.json
	Command string
	Args    []string
	Env     map[string]string
	Cwd     string
	// CwdIsProject: Cwd is its project's directory, as the entry named
	// none and the client runs it there.
	CwdIsProject bool
	// Disabled: written with disabled = true (disabled in the client, or
	// ProjectGone: its project directory is gone).
	Disabled    bool
	ProjectGone bool

	// URL is set for a remote server, which mcp-mux speaks to over HTTP
	// with Transport and Headers.
	URL       string
	Transport string // backends.TransportAuto, TransportStreamable or TransportSSE
	Headers   map[string]string

	// Unusable says why mcp-mux cannot run this entry as written; it is
	// kept commented out with that reason.
	Unusable string
	// Notes say what the import changed or left out, for comments;
	// Warnings, what the user must hear about now. Neither ever holds a
	// value of env or headers.
	Notes    []string
	Warnings []string
	// Vars are the environment variables its values refer to as ${NAME}
	// without a default: they must be set when mcp-mux loads the config.
	Vars []string
	// VarRefs are how the client wrote each of Vars ("${input:gh-token}",
	// "${env:NAME}", "${NAME}"): mcp-mux's entry in that client gives
	// them to mcp-mux so.
	VarRefs map[string]string
}

// Remote reports whether s is served over HTTP rather than run.
func (s *Server) Remote() bool { return s.URL != "" }

// Options tell how to resolve what a client would resolve at run time.
type Options struct {
	Home string // the user's home directory, for ${userHome}
}

// Read reads one client config file (data, read from path).
func Read(path string, data []byte, opt Options) (*File, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	top, err := decodeObject(path, stripJSONC(data))
	if err != nil {
		return nil, err
	}
	f := &File{Path: abs}
	base, parent := filepath.Base(abs), filepath.Base(filepath.Dir(abs))
	vsServers, isVS := top.get("servers")
	if !isVS {
		// VS Code's settings.json held them under "mcp" before mcp.json.
		if mcp, ok := top.get("mcp"); ok {
			if o, err := decodeObject(path, mcp); err == nil {
				vsServers, isVS = o.get("servers")
			}
		}
	}
	projects, hasProjects := top.get("projects")
	switch {
	case isVS:
		f.Client = ClientVSCode
		if parent == ".vscode" {
			f.Project = filepath.Dir(filepath.Dir(abs))
		}
	case base == "claude_desktop_config.json":
		f.Client = ClientClaudeDesktop
	case base == ".claude.json" || hasProjects:
		f.Client = ClientClaudeCode
	case base == ".mcp.json":
		f.Client, f.Project = ClientClaudeCode, filepath.Dir(abs)
	case parent == ".cursor":
		f.Client = ClientCursor
		if dir := filepath.Dir(filepath.Dir(abs)); opt.Home == "" || !samePath(dir, opt.Home) {
			f.Project = dir
		}
	default:
		f.Client = ClientOther
	}
	servers, hasServers := top.get("mcpServers")
	if isVS {
		servers, hasServers = vsServers, true
	}
	if !hasServers && !hasProjects {
		return nil, fmt.Errorf(`%s: no MCP servers in this file: expected "mcpServers" (Claude Desktop, Claude Code, Cursor) or "servers" (VS Code) at the top`, path)
	}
	c := &converter{file: f, home: opt.Home, project: f.Project}
	if isVS {
		if raw, ok := top.get("inputs"); ok {
			c.readInputs(raw)
		}
	}
	if hasServers {
		if err := c.addServers(servers, ""); err != nil {
			return nil, err
		}
	}
	if hasProjects && f.Client == ClientClaudeCode {
		projs, err := decodeObject(path, projects)
		if err != nil {
			return nil, fmt.Errorf("%s: projects: %w", path, err)
		}
		for _, p := range projs {
			po, err := decodeObject(path, p.val)
			if err != nil {
				continue
			}
			if ps, ok := po.get("mcpServers"); ok {
				pc := &converter{file: f, home: opt.Home, project: p.key, inputs: c.inputs}
				if err := pc.addServers(ps, p.key); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(c.inputs) > 0 {
		f.Notes = append(f.Notes, `VS Code asks the user for each "inputs" entry; mcp-mux cannot ask, so each ${input:ID} became a variable that mcp-mux reads from its own environment (see the servers' comments)`)
	}
	return f, nil
}

func samePath(a, b string) bool {
	return filepath.Clean(a) == filepath.Clean(b)
}

// field is one member of a JSON object, in file order.
type field struct {
	key string
	val json.RawMessage
}

type object []field

func (o object) get(key string) (json.RawMessage, bool) {
	for _, f := range o {
		if f.key == key {
			return f.val, true
		}
	}
	return nil, false
}

// decodeObject decodes a JSON object keeping its members' order (the
// servers are written in the order of the client's file). A syntax error
// is reported by line and column, without the text around it.
func decodeObject(path string, data []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(path, data, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%s: expected a JSON object", path)
	}
	var out object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(path, data, err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, jsonError(path, data, err)
		}
		out = append(out, field{key, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonError(path, data, err)
	}
	return out, nil
}

func jsonError(path string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(int(se.Offset), len(data))
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := off - bytes.LastIndexByte(data[:off], '\n')
		return fmt.Errorf("%s:%d:%d: not valid JSON: %s", path, line, col, se.Error())
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: not valid JSON: the file ends in the middle of a value", path)
	}
	return fmt.Errorf("%s: not valid JSON: %w", path, err)
}

// stripJSONC blanks out // and /* */ comments and drops trailing commas,
// which VS Code's and Cursor's files may have, keeping every newline so
// that error lines stay right.
func stripJSONC(data []byte) []byte {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	out := make([]byte, 0, len(data))
	inStr := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inStr:
			out = append(out, c)
			if c == '\\' && i+1 < len(data) {
				i++
				out = append(out, data[i])
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
			out = append(out, c)
		case c == '/' && i+1 < len(data) && data[i+1] == '/':
			for i < len(data) && data[i] != '\n' {
				out = append(out, ' ')
				i++
			}
			if i < len(data) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(data) && data[i+1] == '*':
			end := bytes.Index(data[i+2:], []byte("*/"))
			stop := len(data)
			if end >= 0 {
				stop = i + 2 + end + 2
			}
			for ; i < stop; i++ {
				if data[i] == '\n' {
					out = append(out, '\n')
				} else {
					out = append(out, ' ')
				}
			}
			i--
		case c == '}' || c == ']':
			// A comma followed only by blanks before the closing bracket.
			j := len(out) - 1
			for j >= 0 && (out[j] == ' ' || out[j] == '\t' || out[j] == '\r' || out[j] == '\n') {
				j--
			}
			if j >= 0 && out[j] == ',' {
				out[j] = ' '
			}
			out = append(out, c)
		default:
			out = append(out, c)
		}
	}
	return out
}

// converter turns the entries of one servers object into ImportedServers.
type converter struct {
	file    *File
	home    string
	project string             // for ${workspaceFolder} and the default cwd
	inputs  map[string]vsInput // VS Code input id → what it says of itself
}

// vsInput is one entry of VS Code's "inputs": a value VS Code asks the
// user for (promptString), or lets them pick (pickString), offering
// Default.
type vsInput struct {
	Description string
	Default     string
	HasDefault  bool
	Password    bool
}

func (c *converter) readInputs(raw json.RawMessage) {
	var inputs []struct {
		ID          string `json:"id"`
		Description string `json:"description"`
		Default     any    `json:"default"`
		Password    bool   `json:"password"`
	}
	if json.Unmarshal(raw, &inputs) != nil {
		return
	}
	c.inputs = map[string]vsInput{}
	for _, in := range inputs {
		if in.ID == "" {
			continue
		}
		v := vsInput{Description: in.Description, Password: in.Password}
		v.Default, v.HasDefault = in.Default.(string)
		c.inputs[in.ID] = v
	}
}

func (c *converter) addServers(raw json.RawMessage, project string) error {
	servers, err := decodeObject(c.file.Path, raw)
	if err != nil {
		return fmt.Errorf("%w (its servers must be a JSON object)", err)
	}
	for _, s := range servers {
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(s.val))
		dec.UseNumber()
		srv := Server{Name: s.key, Project: project}
		if err := dec.Decode(&m); err != nil || m == nil {
			srv.Unusable = "its entry is not a JSON object"
		} else {
			c.convert(&srv, m)
		}
		c.file.Servers = append(c.file.Servers, srv)
	}
	return nil
}

// knownKeys are the entry keys that are imported; others are named in a note.
var knownKeys = map[string]bool{"command": true, "args": true, "env": true, "envFile": true, "cwd": true,
	"type": true, "transport": true, "url": true, "headers": true, "disabled": true}

func (c *converter) convert(s *Server, m map[string]any) {
	var unknown []string
	for k := range m {
		if !knownKeys[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		s.Notes = append(s.Notes, leftOut(unknown, "mcp-mux has no equivalent"))
	}
	if d, ok := m["disabled"].(bool); ok && d {
		s.Disabled = true
		s.Notes = append(s.Notes, "disabled in "+c.file.Client)
	}
	typ, _ := m["type"].(string)
	if typ == "" {
		typ, _ = m["transport"].(string)
	}
	rawURL, _ := m["url"].(string)
	switch strings.ToLower(typ) {
	case "", "stdio":
	case "http", "streamable-http", "streamablehttp", "streamable":
		s.Transport = backends.TransportStreamable
	case "sse":
		s.Transport = backends.TransportSSE
	default:
		s.Unusable = fmt.Sprintf("its type %q is not a transport mcp-mux knows", typ)
		return
	}
	if rawURL != "" || s.Transport != "" {
		c.remote(s, m, typ, rawURL)
		return
	}

	command, ok := m["command"].(string)
	if !ok || strings.TrimSpace(command) == "" {
		s.Unusable = "it has no command (and no url)"
		return
	}
	args, ok := c.stringList(s, m["args"])
	if !ok {
		s.Unusable = "its args are not a list of strings"
		return
	}
	if len(args) == 0 {
		command, args = c.splitCommand(s, command)
	}
	s.Command = c.vars(s, command, "command")
	for i, a := range args {
		args[i] = c.vars(s, a, "args")
	}
	s.Args = args
	s.Env = c.stringMap(s, m["env"], "env")
	if ef, ok := m["envFile"].(string); ok && ef != "" {
		c.envFile(s, ef)
	}
	if cwd, ok := m["cwd"].(string); ok && cwd != "" {
		s.Cwd = c.vars(s, cwd, "cwd")
		if s.Cwd != "" && !filepath.IsAbs(s.Cwd) && !strings.HasPrefix(s.Cwd, "${") && c.project != "" {
			s.Cwd = filepath.Join(escapeDollars(c.project, false), s.Cwd)
		}
	} else if c.project != "" {
		s.Cwd, s.CwdIsProject = escapeDollars(c.project, false), true
		s.Notes = append(s.Notes, "its working directory (cwd) is its project's directory, where "+c.file.Client+" runs it")
	}
	if c.project != "" && !s.Disabled {
		if fi, err := os.Stat(c.project); err != nil || !fi.IsDir() {
			s.Disabled, s.ProjectGone = true, true
			s.Notes = append(s.Notes, "disabled: its project directory no longer exists")
		}
	}
}

// remote makes s a remote backend: the client's url as written (mcp-mux
// expands nothing in a url), its transport (auto unless the client said
// which) and its headers, whose values are translated as env's are. What
// mcp-mux would refuse to load makes s unusable, with the reason.
func (c *converter) remote(s *Server, m map[string]any, typ, rawURL string) {
	if s.Transport == "" {
		s.Transport = backends.TransportAuto
	}
	var ignored []string
	for _, k := range []string{"command", "args", "env", "envFile", "cwd"} {
		if given(m[k]) {
			ignored = append(ignored, k)
		}
	}
	if len(ignored) > 0 {
		s.Notes = append(s.Notes, leftOut(ignored, "a remote server runs nothing"))
	}
	s.URL = rawURL
	u, err := neturl.Parse(rawURL)
	switch {
	case rawURL == "":
		s.Unusable = fmt.Sprintf("it has type %q but no url", typ)
	case clientVarRe.MatchString(rawURL):
		s.Unusable = "its url uses a variable (${...}), which mcp-mux does not expand in url (a token belongs in headers)"
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		s.Unusable = "its url is not an http:// or https:// URL"
	}

	s.Headers = c.stringMap(s, m["headers"], "headers")
	seen := map[string]string{}
	for _, name := range sortedKeys(s.Headers) {
		canon := http.CanonicalHeaderKey(name)
		problem := ""
		switch {
		case name == "" || config.HeaderNameShown(name) != name:
			// Shown up to where it stops being a name: it may be a
			// pasted "Authorization: Bearer <token>".
			problem = fmt.Sprintf("its header name %s is not a valid header name", tomlString(config.HeaderNameShown(name)))
		case config.IsProtocolHeader(canon):
			delete(s.Headers, name)
			s.Notes = append(s.Notes, fmt.Sprintf("its header %s was left out, as the transport sets it on every request", tomlString(name)))
			continue
		case seen[canon] != "":
			problem = fmt.Sprintf("its headers %s and %s are one header (names are case-insensitive)", tomlString(seen[canon]), tomlString(name))
		case strings.ContainsAny(s.Headers[name], "\r\n\x00"):
			problem = fmt.Sprintf("the value of its header %s has a line break or NUL character", tomlString(name))
		}
		if problem != "" && s.Unusable == "" {
			s.Unusable = problem
		}
		seen[canon] = name
	}
	if len(s.Headers) == 0 {
		s.Headers = nil
	}
}

// leftOut is the note for the keys of an entry that were not imported
// (the entry itself was): it must not read as the "Not imported, as ..."
// of an entry kept commented out.
func leftOut(keys []string, why string) string {
	if len(keys) == 1 {
		return fmt.Sprintf("its key %s was left out, as %s", tomlString(keys[0]), why)
	}
	return fmt.Sprintf("its keys %s were left out, as %s", strings.Join(quoteAll(keys), ", "), why)
}

// given reports whether a key's value says something: present, and not
// empty.
func given(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = tomlString(s)
	}
	return out
}

// stringList reads args: strings, and numbers or booleans as written.
func (c *converter) stringList(s *Server, v any) ([]string, bool) {
	if v == nil {
		return nil, true
	}
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		str, ok := scalarString(e)
		if !ok {
			return nil, false
		}
		out = append(out, str)
	}
	return out, true
}

func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		return fmt.Sprint(x), true
	}
	return "", false
}

// stringMap reads env or headers. Values are translated like the rest;
// null (VS Code: unset the variable) is left out, as a backend starts
// from a minimal environment anyway.
func (c *converter) stringMap(s *Server, v any, what string) map[string]string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		if v != nil && !ok {
			s.Notes = append(s.Notes, what+" is not a JSON object: not imported")
		}
		return nil
	}
	out := make(map[string]string, len(m))
	// In key order: the notes and variables it records end up in the
	// output, which must not change from one run to the next.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		val := m[k]
		str, ok := scalarString(val)
		if !ok {
			s.Notes = append(s.Notes, fmt.Sprintf("%s %s is not a string: left out", what, tomlString(k)))
			continue
		}
		out[k] = c.vars(s, str, what)
	}
	return out
}
