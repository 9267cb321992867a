package clientimport

import (
	"path/filepath"
	"strings"
)

// Location is a file where a client keeps its MCP servers.
type Location struct {
	Client string
	Path   string
}

// Locations lists where each client keeps its MCP servers on
// goos: the user's own files (under the home directory and the OS's
// config directory, from getenv as the clients find them) and the
// project's (under dir, the current directory). A path is listed once.
func Locations(goos string, getenv func(string) string, dir string) []Location {
	home, config := userDirs(goos, getenv)
	var out []Location
	add := func(client string, parts ...string) {
		if parts[0] == "" {
			return
		}
		p := filepath.Join(parts...)
		for _, l := range out {
			if l.Path == p {
				return
			}
		}
		out = append(out, Location{Client: client, Path: p})
	}
	add(ClientClaudeDesktop, config, "Claude", "claude_desktop_config.json")
	add(ClientClaudeCode, home, ".claude.json")
	add(ClientClaudeCode, dir, ".mcp.json")
	add(ClientCursor, home, ".cursor", "mcp.json")
	add(ClientCursor, dir, ".cursor", "mcp.json")
	add(ClientVSCode, config, "Code", "User", "mcp.json")
	add(ClientVSCode, dir, ".vscode", "mcp.json")
	return out
}

// userDirs returns the home directory and the per-user config directory
// on goos, as os.UserHomeDir and os.UserConfigDir find them there.
func userDirs(goos string, getenv func(string) string) (home, config string) {
	switch goos {
	case "windows":
		home = getenv("USERPROFILE")
		if home == "" && getenv("HOMEDRIVE") != "" {
			home = getenv("HOMEDRIVE") + getenv("HOMEPATH")
		}
		config = getenv("APPDATA")
		if config == "" && home != "" {
			config = filepath.Join(home, "AppData", "Roaming")
		}
	case "darwin", "ios":
		home = getenv("HOME")
		if home != "" {
			config = filepath.Join(home, "Library", "Application Support")
		}
	default:
		home = getenv("HOME")
		config = getenv("XDG_CONFIG_HOME")
		if !strings.HasPrefix(config, "/") { // absolute on goos, wherever this runs
			config = ""
			if home != "" {
				config = filepath.Join(home, ".config")
			}
		}
	}
	return home, config
}
