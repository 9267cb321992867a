package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestUserConfigPathsFollowTheOS: the user's config is where
// os.UserConfigDir puts it on each OS; on macOS ~/.config first (what CLI
// users expect), then ~/Library/Application Support.
func TestUserConfigPathsFollowTheOS(t *testing.T) {
	root := t.TempDir() // absolute on every OS
	xdg, home, appdata := filepath.Join(root, "xdg"), filepath.Join(root, "home"), filepath.Join(root, "AppData", "Roaming")
	in := func(dir string) string { return filepath.Join(dir, "mcp-mux", "config.toml") }
	dotConfig := in(filepath.Join(home, ".config"))
	library := in(filepath.Join(home, "Library", "Application Support"))
	for _, tt := range []struct {
		name, goos string
		env        map[string]string
		want       []string
	}{
		{"linux XDG_CONFIG_HOME", "linux", map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, []string{in(xdg)}},
		{"linux HOME", "linux", map[string]string{"HOME": home}, []string{dotConfig}},
		{"linux relative XDG_CONFIG_HOME is ignored", "linux", map[string]string{"XDG_CONFIG_HOME": "rel", "HOME": home}, []string{dotConfig}},
		{"linux nothing set", "linux", map[string]string{"APPDATA": appdata}, nil},
		{"freebsd as linux", "freebsd", map[string]string{"HOME": home}, []string{dotConfig}},
		{"darwin", "darwin", map[string]string{"HOME": home}, []string{dotConfig, library}},
		{"darwin XDG_CONFIG_HOME", "darwin", map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, []string{in(xdg), library}},
		{"darwin nothing set", "darwin", map[string]string{}, nil},
		{"windows APPDATA, not XDG nor HOME", "windows", map[string]string{"APPDATA": appdata, "XDG_CONFIG_HOME": xdg, "HOME": home, "USERPROFILE": home}, []string{in(appdata)}},
		{"windows without APPDATA", "windows", map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			got := userConfigPaths(tt.goos, getenv)
			if !slices.Equal(got, tt.want) {
				t.Errorf("userConfigPaths = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestUserConfigPathIsTheFirstPlaceLooked: `mcp-mux init` writes where
// Find looks first on this OS.
func TestUserConfigPathIsTheFirstPlaceLooked(t *testing.T) {
	root := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": filepath.Join(root, "xdg"), "HOME": root, "USERPROFILE": root, "APPDATA": filepath.Join(root, "AppData")}
	getenv := func(k string) string { return env[k] }
	got := UserPath(getenv)
	if want := userConfigPaths(hostOS, getenv); len(want) == 0 || got != want[0] {
		t.Errorf("UserPath = %q, want the first of %q", got, want)
	}
	clear(env)
	if got := UserPath(getenv); got != "" {
		t.Errorf("UserPath = %q with nothing set, want \"\"", got)
	}
}

// TestFindConfigLooksInEveryPlaceOfTheOS: on macOS a config in
// ~/Library/Application Support is found, one in ~/.config preferred; on
// Windows the one in %APPDATA%; the error names every place, or the
// variable that is not set.
func TestFindConfigLooksInEveryPlaceOfTheOS(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no ./mcp-mux.toml
	home := filepath.Join(dir, "home")
	appdata := filepath.Join(dir, "AppData", "Roaming")
	env := map[string]string{"HOME": home, "APPDATA": appdata}
	getenv := func(k string) string { return env[k] }
	write := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	find := func(goos string) (string, error) { return findFor("", goos, getenv) }

	dotConfig := filepath.Join(home, ".config", "mcp-mux", "config.toml")
	library := filepath.Join(home, "Library", "Application Support", "mcp-mux", "config.toml")
	_, err := find("darwin")
	for _, p := range []string{dotConfig, library} {
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("darwin: error does not name %s: %v", p, err)
		}
	}
	write(library)
	if got, err := find("darwin"); got != library {
		t.Errorf("darwin: got %q, %v; want %s", got, err, library)
	}
	if got, err := find("linux"); err == nil {
		t.Errorf("linux: found %q, which is macOS's place", got)
	}
	write(dotConfig)
	if got, err := find("darwin"); got != dotConfig {
		t.Errorf("darwin: got %q, %v; want %s, before Library", got, err, dotConfig)
	}

	appdataFile := filepath.Join(appdata, "mcp-mux", "config.toml")
	if _, err := find("windows"); err == nil || !strings.Contains(err.Error(), appdataFile) || strings.Contains(err.Error(), dotConfig) {
		t.Errorf("windows: error should name %s alone: %v", appdataFile, err)
	}
	write(appdataFile)
	if got, err := find("windows"); got != appdataFile {
		t.Errorf("windows: got %q, %v; want %s", got, err, appdataFile)
	}
	delete(env, "APPDATA")
	if _, err := find("windows"); err == nil || !strings.Contains(err.Error(), `%APPDATA%\mcp-mux\config.toml (APPDATA is not set)`) {
		t.Errorf("windows without APPDATA: %v", err)
	}
	delete(env, "HOME")
	if _, err := find("darwin"); err == nil || !strings.Contains(err.Error(), "neither XDG_CONFIG_HOME nor HOME is set") {
		t.Errorf("darwin without HOME: %v", err)
	}
}

// TestNoConfigFoundNamesTheCommandsThatWriteOne: a user who installed the
// binary has no mcp-mux.toml.example to copy; init and import write a
// config, at the place Find looks first.
func TestNoConfigFoundNamesTheCommandsThatWriteOne(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no ./mcp-mux.toml
	home := filepath.Join(dir, "home")
	env := map[string]string{"HOME": home}
	getenv := func(k string) string { return env[k] }
	user := filepath.Join(home, ".config", "mcp-mux", "config.toml")
	_, err := findFor("", "linux", getenv)
	if err == nil {
		t.Fatal("found a config in an empty directory")
	}
	for _, want := range []string{"`mcp-mux init`", "`mcp-mux import --output " + user + "`", "--config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "mcp-mux.toml.example") {
		t.Errorf("error names the example, which only a clone of the repository has:\n%v", err)
	}
	delete(env, "HOME")
	if _, err := findFor("", "linux", getenv); err == nil || !strings.Contains(err.Error(), "`mcp-mux init --output FILE`") {
		t.Errorf("without HOME, init needs --output: %v", err)
	}
}
