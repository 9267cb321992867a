// Package secrets keeps mcp-mux's secrets (OAuth sign-ins, the values
// ${secret:NAME} names) where the OS keeps secrets, or in private files
// when it has no store that answers.
//
// The OS store is the macOS Keychain, the Windows Credential Manager or
// the Secret Service (GNOME Keyring, KWallet) on Linux, through
// github.com/zalando/go-keyring, under the service "mcp-mux". Every call
// to it is bounded (KeyringTimeout): a Secret Service that waits on an
// unlock prompt nobody answers, or a D-Bus that does not reply, must not
// stall mcp-mux; after one such stall the process uses the files only. A
// Linux box without a session bus (a server, CI) is not asked at all. The
// files are in StateDir, 0600 in a 0700 directory.
//
// The environment can force a choice: MCP_MUX_SECRET_STORE=file (never the
// OS store; the tests use it), =keyring (the OS store or an error), and
// MCP_MUX_STATE_DIR moves the files.
package secrets

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zalando/go-keyring"
)

// Service is the name the OS store files mcp-mux's secrets under.
const Service = "mcp-mux"

// KeyringTimeout bounds one call to the OS store.
var KeyringTimeout = 3 * time.Second

// ErrNotFound is returned by Get for a key that holds nothing.
var ErrNotFound = errors.New("not stored")

// Store holds secrets by key. Keys are short ASCII names
// ("secret:GITHUB", "oauth:1f3a…"); values are never logged.
type Store interface {
	Get(key string) (string, error)
	Set(key, value string) error
	Delete(key string) error
	// Where says where key's value is (or would be) kept, for messages:
	// "the macOS Keychain", "/home/u/.local/state/mcp-mux/secrets/…".
	Where(key string) string
}

// StateDir is where mcp-mux keeps what it must remember between runs and
// share between its processes (sign-ins, their locks): MCP_MUX_STATE_DIR,
// else $XDG_STATE_HOME/mcp-mux (~/.local/state/mcp-mux) on Linux and other
// Unix, the user config directory's mcp-mux on macOS (~/Library/Application
// Support/mcp-mux) and %LOCALAPPDATA%\mcp-mux on Windows.
func StateDir() (string, error) {
	if d := os.Getenv("MCP_MUX_STATE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	switch runtime.GOOS {
	case "windows":
		if d := os.Getenv("LOCALAPPDATA"); d != "" {
			return filepath.Join(d, "mcp-mux"), nil
		}
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no directory for mcp-mux's state: %w", err)
		}
		return filepath.Join(d, "mcp-mux"), nil
	case "darwin", "ios":
		d, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no directory for mcp-mux's state: %w", err)
		}
		return filepath.Join(d, "mcp-mux"), nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "mcp-mux"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no directory for mcp-mux's state (set MCP_MUX_STATE_DIR): %w", err)
	}
	return filepath.Join(home, ".local", "state", "mcp-mux"), nil
}

// PrivateDir is sub of StateDir, made 0700 (and its parents) if missing.
// An existing directory that others can read is made 0700 too.
func PrivateDir(sub string) (string, error) {
	root, err := StateDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("making %s: %w", dir, err)
	}
	if runtime.GOOS != "windows" {
		for _, d := range []string{root, dir} {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o077 != 0 {
				if err := os.Chmod(d, 0o700); err != nil {
					return "", fmt.Errorf("making %s private: %w", d, err)
				}
			}
		}
	}
	return dir, nil
}

var (
	defaultOnce  sync.Once
	defaultStore Store
	defaultErr   error
)

// Default is the store this process uses (see the package comment).
func Default() (Store, error) {
	if os.Getenv("MCP_MUX_SECRET_STORE") == "file" {
		// Not remembered: tests point each at a directory of its own.
		return &FileStore{}, nil
	}
	defaultOnce.Do(func() {
		files := &FileStore{}
		switch mode := os.Getenv("MCP_MUX_SECRET_STORE"); mode {
		case "keyring":
			defaultStore = &keyringStore{files: nil}
		case "", "auto":
			if keyringReachable() {
				defaultStore = &keyringStore{files: files}
			} else {
				defaultStore = files
			}
		default:
			defaultErr = fmt.Errorf("MCP_MUX_SECRET_STORE=%q: want file, keyring or auto", mode)
		}
	})
	return defaultStore, defaultErr
}

// keyringReachable reports whether asking the OS store can make sense: on
// Linux and the BSDs only with a session bus (else the D-Bus library would
// start one with dbus-launch, on a box where nobody unlocks a keyring).
func keyringReachable() bool {
	switch runtime.GOOS {
	case "darwin", "windows":
		return true
	}
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		return true
	}
	if rd := os.Getenv("XDG_RUNTIME_DIR"); rd != "" {
		if _, err := os.Stat(filepath.Join(rd, "bus")); err == nil {
			return true
		}
	}
	return false
}

// keyringStore is the OS store, with files for what it cannot hold (a
// value over its size limit) or when it does not answer. files is nil
// when the OS store was asked for alone.
type keyringStore struct {
	files *FileStore
	// broken: a call stalled past KeyringTimeout or the store said it is
	// not there; this process uses the files from then on.
	broken atomic.Bool
}

// errStalled is a call to the OS store that did not return in time.
var errStalled = errors.New("the OS secret store did not answer in time")

// bounded runs f within KeyringTimeout. A call that stalls is left to
// finish on its own; its result is dropped.
func (k *keyringStore) bounded(f func() (string, error)) (string, error) {
	type result struct {
		v   string
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil && !errors.Is(r.err, keyring.ErrNotFound) && !errors.Is(r.err, keyring.ErrSetDataTooBig) {
			// Unsupported platform, no Secret Service, a locked
			// collection: the same next time.
			k.broken.Store(true)
		}
		return r.v, r.err
	case <-time.After(KeyringTimeout):
		k.broken.Store(true)
		return "", errStalled
	}
}

func (k *keyringStore) usable() bool { return !k.broken.Load() || k.files == nil }

func (k *keyringStore) Get(key string) (string, error) {
	if k.usable() {
		v, err := k.bounded(func() (string, error) { return keyring.Get(Service, key) })
		switch {
		case err == nil:
			return v, nil
		case k.files == nil && errors.Is(err, keyring.ErrNotFound):
			return "", ErrNotFound
		case k.files == nil:
			return "", fmt.Errorf("reading the OS secret store: %w", err)
		}
	}
	// Not in the OS store: it may be in a file, being too large for it,
	// or written while the OS store did not answer.
	return k.files.Get(key)
}

func (k *keyringStore) Set(key, value string) error {
	if k.usable() {
		_, err := k.bounded(func() (string, error) { return "", keyring.Set(Service, key, value) })
		if err == nil {
			if k.files != nil {
				// An older copy in a file must not outlive this one.
				if err := k.files.Delete(key); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
			}
			return nil
		}
		if k.files == nil {
			return fmt.Errorf("writing to the OS secret store: %w", err)
		}
		if errors.Is(err, keyring.ErrSetDataTooBig) {
			// The file copy is the one now: an older value in the
			// OS store would be read first.
			k.bounded(func() (string, error) { return "", keyring.Delete(Service, key) })
		}
	}
	return k.files.Set(key, value)
}

func (k *keyringStore) Delete(key string) error {
	found := false
	if k.usable() {
		_, err := k.bounded(func() (string, error) { return "", keyring.Delete(Service, key) })
		switch {
		case err == nil:
			found = true
		case errors.Is(err, keyring.ErrNotFound):
		case k.files == nil:
			return fmt.Errorf("deleting from the OS secret store: %w", err)
		}
	}
	if k.files != nil {
		err := k.files.Delete(key)
		switch {
		case err == nil:
			found = true
		case !errors.Is(err, ErrNotFound):
			return err
		}
	}
	if !found {
		return ErrNotFound
	}
	return nil
}

func (k *keyringStore) Where(key string) string {
	if !k.usable() {
		return k.files.Where(key)
	}
	switch runtime.GOOS {
	case "darwin":
		return "the macOS Keychain (service " + Service + ")"
	case "windows":
		return "the Windows Credential Manager (" + Service + ")"
	}
	return "the Secret Service keyring (service " + Service + ")"
}

// FileStore keeps each secret in a file of its own under
// StateDir/secrets, 0600 in a 0700 directory. Dir, if set, is used
// instead (tests).
type FileStore struct {
	Dir string
}

func (f *FileStore) dir() (string, error) {
	if f.Dir != "" {
		if err := os.MkdirAll(f.Dir, 0o700); err != nil {
			return "", err
		}
		return f.Dir, nil
	}
	return PrivateDir("secrets")
}

// fileName makes key a file name: keys are ASCII names, ':' and path
// separators are not welcome in one.
func fileName(key string) string {
	var b strings.Builder
	for _, c := range key {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
			b.WriteRune(c)
		default:
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	return b.String()
}

func (f *FileStore) path(key string) (string, error) {
	d, err := f.dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, fileName(key)), nil
}

// readPath is key's file, for reading or removing: no directory is made.
func (f *FileStore) readPath(key string) (string, error) {
	d := f.Dir
	if d == "" {
		root, err := StateDir()
		if err != nil {
			return "", err
		}
		d = filepath.Join(root, "secrets")
	}
	return filepath.Join(d, fileName(key)), nil
}

func (f *FileStore) Get(key string) (string, error) {
	p, err := f.readPath(key)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("reading a stored secret: %w", err)
	}
	return string(data), nil
}

// Set writes a new file and renames it over the old one: a reader in
// another process sees the old value or the new one, never half of one.
func (f *FileStore) Set(key, value string) error {
	p, err := f.path(key)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".new-*")
	if err != nil {
		return fmt.Errorf("storing a secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil && runtime.GOOS != "windows" {
		tmp.Close()
		return fmt.Errorf("storing a secret: %w", err)
	}
	if _, err := tmp.WriteString(value); err != nil {
		tmp.Close()
		return fmt.Errorf("storing a secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("storing a secret: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("storing a secret: %w", err)
	}
	return nil
}

func (f *FileStore) Delete(key string) error {
	p, err := f.readPath(key)
	if err != nil {
		return err
	}
	err = os.Remove(p)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNotFound
	}
	return err
}

func (f *FileStore) Where(key string) string {
	p, err := f.readPath(key)
	if err != nil {
		return "a file in mcp-mux's state directory"
	}
	return p
}

// ValidName reports whether name may name a secret of ${secret:NAME}:
// letters, digits, "_", "-" and ".".
func ValidName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// Get is the value ${secret:NAME} stands for, from the default store.
func Get(name string) (string, error) {
	s, err := Default()
	if err != nil {
		return "", err
	}
	return s.Get("secret:" + name)
}

// Set stores the value of ${secret:NAME} in the default store and says
// where.
func Set(name, value string) (where string, err error) {
	s, err := Default()
	if err != nil {
		return "", err
	}
	key := "secret:" + name
	if err := s.Set(key, value); err != nil {
		return "", err
	}
	if err := touch(); err != nil {
		return "", err
	}
	return s.Where(key), nil
}

// Delete removes the value of ${secret:NAME} from the default store.
func Delete(name string) error {
	s, err := Default()
	if err != nil {
		return err
	}
	if err := s.Delete("secret:" + name); err != nil {
		return err
	}
	return touch()
}

// stampPath is the file that changes with every Set and Delete.
func stampPath() (string, error) {
	root, err := StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "secrets.changed"), nil
}

// Stamp changes with every Set and Delete ("" until the first): a serving
// mcp-mux waiting for a secret reads it once a second, a small file,
// rather than asking the OS store, which may be a D-Bus call or a prompt.
func Stamp() string {
	p, err := stampPath()
	if err != nil {
		return ""
	}
	data, _ := os.ReadFile(p)
	return string(data)
}

// touch writes a new stamp, whole (renamed over the old one).
func touch() error {
	p, err := stampPath()
	if err != nil {
		return err
	}
	if _, err := PrivateDir(""); err != nil {
		return err
	}
	tmp := p + ".new-" + rand.Text()[:8]
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %s\n", time.Now().UnixNano(), rand.Text()), 0o600); err != nil {
		return fmt.Errorf("recording that a secret changed: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("recording that a secret changed: %w", err)
	}
	return nil
}
