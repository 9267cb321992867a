package config

// Where the config file is looked for when --config is not given: the
// user's own config follows the OS's conventions (os.UserConfigDir), so
// that it is where a user of that OS looks, and where `mcp-mux init`
// writes.

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// hostOS is the OS whose conventions Find and UserPath follow.
const hostOS = runtime.GOOS

// Find returns the config file to use: flagValue if non-empty, then
// $MCP_MUX_CONFIG, then ./mcp-mux.toml if it exists, then the first of
// the user's config files (see userConfigPaths) that exists. getenv nil
// means os.Getenv.
func Find(flagValue string, getenv func(string) string) (string, error) {
	return findFor(flagValue, hostOS, getenv)
}

// find is Find with the conventions of goos.
func findFor(flagValue, goos string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if flagValue != "" {
		return flagValue, nil
	}
	if v := getenv("MCP_MUX_CONFIG"); v != "" {
		return v, nil
	}
	looked := []string{"--config flag (not given)", "$MCP_MUX_CONFIG (not set)"}
	isFile := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir()
	}
	const local = "mcp-mux.toml"
	if isFile(local) {
		return local, nil
	}
	if wd, err := os.Getwd(); err == nil {
		looked = append(looked, filepath.Join(wd, local))
	} else {
		looked = append(looked, "./"+local)
	}
	user := userConfigPaths(goos, getenv)
	for _, p := range user {
		if isFile(p) {
			return p, nil
		}
		looked = append(looked, p)
	}
	if len(user) == 0 {
		if goos == "windows" {
			looked = append(looked, `%APPDATA%\mcp-mux\config.toml (APPDATA is not set)`)
		} else {
			looked = append(looked, "$XDG_CONFIG_HOME/mcp-mux/config.toml (neither XDG_CONFIG_HOME nor HOME is set)")
		}
	}
	// The example file is only in a clone of the repository: the commands
	// that write a config are what every install has.
	write := "`mcp-mux init --output FILE` writes a starter config, `mcp-mux import --output FILE` converts your agents' MCP servers into one"
	if len(user) > 0 {
		write = fmt.Sprintf("`mcp-mux init` writes a starter config to %s, `mcp-mux import --output %s` converts your agents' MCP servers into one", user[0], ShellQuote(user[0]))
	}
	return "", fmt.Errorf("no config file found; looked at:\n  %s\n(%s; or pass a file with --config)",
		strings.Join(looked, "\n  "), write)
}

// UserPath is the user's own config file, whether or not it exists:
// the first place Find looks after ./mcp-mux.toml (see
// userConfigPaths); "" when the variables it comes from are not set.
// `mcp-mux init` writes there. getenv nil means os.Getenv.
func UserPath(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if p := userConfigPaths(hostOS, getenv); len(p) > 0 {
		return p[0]
	}
	return ""
}

// userConfigPaths lists, in the order they are tried, where the user's
// config file may be on goos, as os.UserConfigDir finds the directory
// there:
//   - Windows: %APPDATA%\mcp-mux\config.toml;
//   - macOS: $XDG_CONFIG_HOME/mcp-mux/config.toml, else
//     ~/.config/mcp-mux/config.toml (where CLI users look), then
//     ~/Library/Application Support/mcp-mux/config.toml;
//   - other Unix: $XDG_CONFIG_HOME/mcp-mux/config.toml, else
//     ~/.config/mcp-mux/config.toml.
//
// A relative XDG_CONFIG_HOME is ignored, as the XDG spec says.
func userConfigPaths(goos string, getenv func(string) string) []string {
	var dirs []string
	switch goos {
	case "windows":
		if appdata := getenv("APPDATA"); appdata != "" {
			dirs = append(dirs, appdata)
		}
	default:
		home := getenv("HOME")
		if xdg := getenv("XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
			dirs = append(dirs, xdg)
		} else if home != "" {
			dirs = append(dirs, filepath.Join(home, ".config"))
		}
		if (goos == "darwin" || goos == "ios") && home != "" {
			dirs = append(dirs, filepath.Join(home, "Library", "Application Support"))
		}
	}
	paths := make([]string, len(dirs))
	for i, d := range dirs {
		paths[i] = filepath.Join(d, "mcp-mux", "config.toml")
	}
	return paths
}
