// Package rendezvous is where a user's mcp-mux sessions meet the one
// long-lived mcp-mux of their config file: a private directory, a socket
// (a named pipe on Windows) only the user can open, two locks that make
// exactly one long-lived process per config and build, and the one-line
// hello each session sends before its agent's bytes.
//
// The names hold the build (a hash of the executable), so a session of
// another build never talks to a running mcp-mux: it starts its own
// beside it, and the old one ends with its last session. A free run lock
// is the only proof that a socket is stale; nothing is probed and then
// removed.
//
// It imports nothing of mcp-mux's but mux/winpipe (Windows).
package rendezvous

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DirEnv names the rendezvous directory in place of the user's own (tests
// keep their processes apart from the user's with it).
const DirEnv = "MCP_MUX_RUN_DIR"

// Version is the hello's: a process of another version is another build.
const Version = 1

// MaxHello bounds a hello line (it carries the session's environment).
const MaxHello = 1 << 20

// HelloTimeout bounds how long either side waits for the other's line.
const HelloTimeout = 5 * time.Second

// Place is one config's rendezvous for one build.
type Place struct {
	Dir    string
	Key    string // hash of the config path, then of the build
	Config string // the config file, absolute
	Build  string
}

// For is the rendezvous of the config file at path (canonicalised: a
// link and its target meet at one place) for build, in dir ("": the
// user's own, see Dir).
func For(dir, path, build string) (Place, error) {
	if dir == "" {
		d, err := Dir()
		if err != nil {
			return Place{}, err
		}
		dir = d
	}
	canon, err := filepath.Abs(path)
	if err != nil {
		return Place{}, fmt.Errorf("config path: %w", err)
	}
	if r, err := filepath.EvalSymlinks(canon); err == nil {
		canon = r
	}
	sum := sha256.Sum256([]byte(canon))
	b := build
	if len(b) > 12 {
		b = b[:12]
	}
	return Place{Dir: dir, Key: hex.EncodeToString(sum[:8]) + "-" + b, Config: canon, Build: build}, nil
}

func (p Place) path(ext string) string { return filepath.Join(p.Dir, p.Key+ext) }

// LogPath is where the long-lived process writes its log when the config
// names no log_file (it has no terminal).
func (p Place) LogPath() string { return p.path(".log") }

// Hello is what a session says first: who it is, and the environment its
// agent gave it, which the long-lived process resolves the config and
// starts the session's backends with.
type Hello struct {
	V        int      `json:"v"`
	Build    string   `json:"build"`
	Config   string   `json:"config"`
	Cwd      string   `json:"cwd"`
	Environ  []string `json:"environ"`
	Profile  string   `json:"profile,omitempty"`
	ToolList string   `json:"tool_list,omitempty"`
	Name     string   `json:"name,omitempty"`
	PID      int      `json:"pid"`
	// Replay: the session lost its long-lived process and replays its
	// agent's initialize.
	Replay bool `json:"replay,omitempty"`
}

// Welcome is the long-lived process's answer; Refused set says why not.
type Welcome struct {
	V       int    `json:"v"`
	PID     int    `json:"pid"`
	Session string `json:"session,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// Refusals a session acts on.
const (
	RefusedBuild    = "build"    // another build: not this session's process
	RefusedStopping = "stopping" // ending: meet the next one
)

type helloLine struct {
	Hello *Hello `json:"mcp_mux_hello"`
}

type welcomeLine struct {
	Welcome *Welcome `json:"mcp_mux_welcome"`
}

// WriteHello sends h.
func WriteHello(w io.Writer, h Hello) error {
	h.V = Version
	return writeLine(w, helloLine{&h})
}

// WriteWelcome sends w.
func WriteWelcome(wr io.Writer, w Welcome) error {
	w.V = Version
	return writeLine(wr, welcomeLine{&w})
}

func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadHello reads a session's hello from r (at most MaxHello bytes).
func ReadHello(r *bufio.Reader) (*Hello, error) {
	var l helloLine
	if err := readLine(r, &l); err != nil {
		return nil, err
	}
	if l.Hello == nil {
		return nil, errors.New("the first line is not an mcp-mux hello")
	}
	return l.Hello, nil
}

// ReadWelcome reads the long-lived process's answer from r.
func ReadWelcome(r *bufio.Reader) (*Welcome, error) {
	var l welcomeLine
	if err := readLine(r, &l); err != nil {
		return nil, err
	}
	if l.Welcome == nil {
		return nil, errors.New("the first line is not an mcp-mux welcome")
	}
	return l.Welcome, nil
}

func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) >= MaxHello {
			return fmt.Errorf("a hello longer than %d bytes", MaxHello)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("reading the hello: %w", err)
	}
	return nil
}

// BuildID names the build of the running executable: a hash of its bytes,
// remembered in dir by the file's identity so that a start does not read
// the whole executable again.
func BuildID(dir string) (string, error) {
	exe, err := executable()
	if err != nil {
		return "", fmt.Errorf("finding this executable: %w", err)
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return "", fmt.Errorf("finding this executable: %w", err)
	}
	memo := ""
	if dir != "" {
		memo = filepath.Join(dir, "build-"+fileIdentity(fi))
		if b, err := os.ReadFile(memo); err == nil && len(b) == 64 {
			return string(b), nil
		}
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", fmt.Errorf("reading this executable: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading this executable: %w", err)
	}
	id := hex.EncodeToString(h.Sum(nil))
	if memo != "" {
		tmp := memo + ".tmp" + fmt.Sprint(os.Getpid())
		if os.WriteFile(tmp, []byte(id), 0o600) == nil {
			os.Rename(tmp, memo)
		}
	}
	return id, nil
}

// Executable is the file this process runs, to start the long-lived
// process from: the same image, on Linux even if the file was replaced.
func Executable() (string, error) { return executable() }

// safe reports whether s may be part of a file name.
func safe(s string) bool { return s != "" && !strings.ContainsAny(s, `/\:`) }
