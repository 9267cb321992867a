package mux

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// The backends' instructions, remembered from one run to the next, so that
// initialize can answer at once: the agent's initialize otherwise waits
// (up to instructionsWait) for every backend to start, only to learn their
// instructions. A backend whose instructions changed since is seen with the
// new ones from the next session on (logged); a backend never seen before
// makes initialize wait as it did.
//
// The file lives in the user's cache directory, is written whole (a temp
// file renamed over it, so two mcp-mux processes never see half of one)
// and keeps the most recently seen maxRemembered backends.

const maxRemembered = 200

type remembered struct {
	Instructions string    `json:"instructions"`
	Seen         time.Time `json:"seen"`
}

// instructionMemory is the file's content, loaded once, and the file.
type instructionMemory struct {
	path string // "" when there is no cache directory: nothing is remembered

	mu      sync.Mutex
	entries map[string]remembered // by instructionKey
}

func newInstructionMemory() *instructionMemory {
	im := &instructionMemory{entries: map[string]remembered{}}
	dir, err := os.UserCacheDir()
	if err != nil {
		return im
	}
	im.path = filepath.Join(dir, "mcp-mux", "instructions.json")
	if data, err := os.ReadFile(im.path); err == nil {
		json.Unmarshal(data, &im.entries) // a damaged file is as good as none
	}
	return im
}

// instructionKey names what makes a backend: its name, what runs it (or
// where it is), never its env or headers, which may hold secrets.
func instructionKey(s config.Backend) string {
	h := sha256.New()
	for _, v := range append([]string{s.Name, s.Command, s.URL, s.Cwd, s.Protocol}, s.Args...) {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// lookup returns the instructions s had when last seen.
func (im *instructionMemory) lookup(s config.Backend) (string, bool) {
	im.mu.Lock()
	defer im.mu.Unlock()
	e, ok := im.entries[instructionKey(s)]
	return e.Instructions, ok
}

// store remembers what s said its instructions are, and reports whether
// they differ from what was remembered (false for a backend not seen
// before). The file is written when they changed, or a day after the last
// write of s.
func (im *instructionMemory) store(s config.Backend, instructions string) (changed bool) {
	if im.path == "" {
		return false
	}
	key, now := instructionKey(s), time.Now()
	im.mu.Lock()
	old, known := im.entries[key]
	if known && old.Instructions == instructions && now.Sub(old.Seen) < 24*time.Hour {
		im.mu.Unlock()
		return false
	}
	// What another mcp-mux wrote meanwhile is kept.
	if data, err := os.ReadFile(im.path); err == nil {
		var onDisk map[string]remembered
		if json.Unmarshal(data, &onDisk) == nil {
			for k, e := range onDisk {
				if cur, ok := im.entries[k]; !ok || e.Seen.After(cur.Seen) {
					im.entries[k] = e
				}
			}
		}
	}
	im.entries[key] = remembered{Instructions: instructions, Seen: now}
	im.prune()
	data, err := json.Marshal(im.entries)
	im.mu.Unlock()
	if err == nil {
		writeAtomically(im.path, data)
	}
	return known && old.Instructions != instructions
}

// prune keeps the maxRemembered most recently seen entries. im.mu is held.
func (im *instructionMemory) prune() {
	if len(im.entries) <= maxRemembered {
		return
	}
	keys := make([]string, 0, len(im.entries))
	for k := range im.entries {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return im.entries[keys[i]].Seen.After(im.entries[keys[j]].Seen) })
	for _, k := range keys[maxRemembered:] {
		delete(im.entries, k)
	}
}

// writeAtomically replaces path with data (0600), or leaves it as it was.
func writeAtomically(path string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".instructions-*")
	if err != nil {
		return
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}
