package catalogmem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
)

const (
	// fileVersion tells this format from a future one, which is read as
	// no file at all.
	fileVersion = 1

	// maxBackends bounds the file to the backends most recently seen: a
	// user who tries many servers over the years should not carry them
	// all.
	maxBackends = 200

	// maxEntryBytes and maxFileBytes keep each process's memory and the
	// disk bounded whatever the backends send: every mcp-mux holds the
	// whole file in memory.
	maxEntryBytes = 8 << 20
	maxFileBytes  = 32 << 20

	// refreshAfter is how old a remembered catalog may grow before an
	// unchanged one is written again, to mark it recently seen (and so
	// keep it from eviction) without a write on every run.
	refreshAfter = 24 * time.Hour

	// lockWait bounds waiting for another process's write.
	lockWait = 10 * time.Second
)

// ErrTooLarge is wrapped by the error of a Put whose catalog is too large
// to be remembered.
var ErrTooLarge = errors.New("the catalog is too large to remember")

// Entry is what one backend offered when last seen, as it sent it: each
// item is kept whole, with its _meta.
type Entry struct {
	ServerInfo      json.RawMessage   `json:"serverInfo,omitempty"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	Capabilities    json.RawMessage   `json:"capabilities,omitempty"`
	Instructions    string            `json:"instructions,omitempty"`
	Tools           []json.RawMessage `json:"tools,omitempty"`
	Prompts         []json.RawMessage `json:"prompts,omitempty"`
	Resources       []json.RawMessage `json:"resources,omitempty"`
	Templates       []json.RawMessage `json:"resourceTemplates,omitempty"`
	// Seen is when the backend offered this; a Put of a zero Seen means
	// now. It is remembered to the day: an unchanged catalog is written
	// again only a day after it last was.
	Seen time.Time `json:"-"`
}

// record is one backend in the file.
type record struct {
	Name    string          `json:"name,omitempty"` // for a person reading the file
	Seen    time.Time       `json:"seen"`
	Catalog json.RawMessage `json:"catalog"` // an Entry, encoded by encodeEntry

	unsaved bool // a write of it failed: the next Put writes again
}

type file struct {
	Version  int               `json:"version"`
	Backends map[string]record `json:"backends"`
}

// Store is the remembered catalogs, loaded from the file once; safe for
// concurrent use. Other processes' writes are seen at this Store's next
// Put or Forget.
type Store struct {
	path string // "": remembered for this run only

	writeMu sync.Mutex // serializes this Store's writes, so that Lookup need not wait for the disk

	mu      sync.Mutex
	entries map[string]record // by Identity.Key
}

// DefaultPath is the file in the user's cache directory, or "" if there is
// none.
func DefaultPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mcp-mux", "catalogs.json")
}

// Open loads the file at path. A missing, damaged or unknown file is an
// empty store, rewritten by the first Put. With path "" nothing outlives
// the Store.
func Open(path string) *Store {
	s := &Store{path: path, entries: map[string]record{}}
	if path != "" {
		s.entries = readFile(path)
	}
	return s
}

// Lookup returns what the backend id offered when last seen.
func (s *Store) Lookup(id Identity) (Entry, bool) {
	s.mu.Lock()
	r, ok := s.entries[id.Key()]
	s.mu.Unlock()
	if !ok {
		return Entry{}, false
	}
	var e Entry
	if json.Unmarshal(r.Catalog, &e) != nil {
		return Entry{}, false
	}
	e.Seen = r.Seen
	return e, true
}

// Put remembers that the backend id offered e, and reports whether that
// differs from what was remembered (or nothing was). The file is written
// only when it differs, or a day after it was last written for id. A
// catalog too large to remember (ErrTooLarge) makes the Store forget id,
// since what it remembered is no longer what the backend offers.
func (s *Store) Put(id Identity, e Entry) (changed bool, err error) {
	catalog, err := encodeEntry(e)
	if err != nil {
		return false, fmt.Errorf("backend %s's catalog is not valid JSON: %w", id.Name, err)
	}
	if len(catalog) > maxEntryBytes {
		ferr := s.Forget(id)
		return true, errors.Join(fmt.Errorf("backend %s's catalog is %d bytes, over the %d remembered: %w",
			id.Name, len(catalog), maxEntryBytes, ErrTooLarge), ferr)
	}
	key := id.Key()
	r := record{Name: id.Name, Seen: e.Seen, Catalog: catalog}
	if r.Seen.IsZero() {
		r.Seen = time.Now()
	}

	s.mu.Lock()
	old, known := s.entries[key]
	changed = !known || !bytes.Equal(old.Catalog, catalog)
	if !changed && !old.unsaved && r.Seen.Sub(old.Seen) < refreshAfter {
		s.mu.Unlock()
		return false, nil
	}
	if s.path == "" {
		s.entries[key] = r
		prune(s.entries, key)
		s.mu.Unlock()
		return changed, nil
	}
	s.mu.Unlock()

	err = s.update(func(m map[string]record) bool {
		m[key] = r
		prune(m, key)
		return true
	})
	if err != nil {
		r.unsaved = true
		s.mu.Lock()
		s.entries[key] = r
		s.mu.Unlock()
	}
	return changed, err
}

// Forget drops what the backend id offered, so that it is learned afresh.
func (s *Store) Forget(id Identity) error {
	key := id.Key()
	s.mu.Lock()
	delete(s.entries, key)
	s.mu.Unlock()
	if s.path == "" {
		return nil
	}
	return s.update(func(m map[string]record) bool {
		if _, ok := m[key]; !ok {
			return false
		}
		delete(m, key)
		return true
	})
}

// update applies change to the file as it is now, holding the lock that
// every process takes to write it, and writes the result if change says
// so. The Store then remembers what the file holds: the file is the truth
// shared by all the processes.
func (s *Store) update(change func(map[string]record) (write bool)) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("create the catalogs' directory: %w", err)
	}
	unlock, err := lockFile(s.path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()

	m := readFile(s.path)
	if change(m) {
		data, err := encodeFile(m)
		if err != nil {
			return fmt.Errorf("encode the remembered catalogs: %w", err)
		}
		if err := writeAtomically(s.path, data); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.entries = m
	s.mu.Unlock()
	return nil
}

func lockFile(path string) (unlock func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	fl := flock.New(path, flock.SetPermissions(0o600))
	ok, err := fl.TryLockContext(ctx, 5*time.Millisecond)
	if err != nil || !ok {
		fl.Close()
		return nil, fmt.Errorf("another mcp-mux process holds the catalogs' lock: %w", errors.Join(err, ctx.Err()))
	}
	return func() { fl.Unlock(); fl.Close() }, nil
}

// readFile returns the backends the file at path holds, none if it is
// missing, damaged or of another version.
func readFile(path string) map[string]record {
	m := map[string]record{}
	f, err := os.Open(path)
	if err != nil {
		return m
	}
	defer f.Close()
	// Pruning counts the catalogs' sizes only; the rest of the file is
	// small beside them, and twice the bound is room enough.
	data, err := io.ReadAll(io.LimitReader(f, 2*maxFileBytes+1))
	if err != nil || len(data) > 2*maxFileBytes {
		return m
	}
	var fl file
	if json.Unmarshal(data, &fl) != nil || fl.Version != fileVersion {
		return m
	}
	for k, r := range fl.Backends {
		if len(r.Catalog) > 0 && len(r.Catalog) <= maxEntryBytes {
			m[k] = r
		}
	}
	prune(m, "")
	return m
}

// prune keeps the maxBackends most recently seen backends of m, as many
// as fit in maxFileBytes; keep, the one just put, stays whatever its Seen.
func prune(m map[string]record, keep string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != keep {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int {
		if c := m[b].Seen.Compare(m[a].Seen); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	if _, ok := m[keep]; ok {
		keys = append([]string{keep}, keys...)
	}
	size := 0
	for i, k := range keys {
		size += len(m[k].Catalog)
		if i >= maxBackends || size > maxFileBytes {
			delete(m, k)
		}
	}
}

// encodeEntry keeps the backend's JSON as it came, but for insignificant
// space: no HTML escaping, so that what is looked up is what was put.
func encodeEntry(e Entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func encodeFile(m map[string]record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(file{Version: fileVersion, Backends: m}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeAtomically replaces path with data, so that a reader sees either
// the old file or the new one, never part of one. The file is the user's
// business (what their backends offer): 0600, as CreateTemp makes it.
func writeAtomically(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".catalogs-*")
	if err != nil {
		return fmt.Errorf("write the remembered catalogs: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		// Without it a crash soon after the rename may leave an empty
		// file on some file systems, losing every backend's catalog.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write the remembered catalogs: %w", err)
	}
	return nil
}

// rename is os.Rename, tried again for a while where it is refused: on
// Windows a file another process is reading (a Store being opened, which
// reads without the lock) cannot be replaced until it is closed, and that
// is a matter of milliseconds.
func rename(from, to string) error {
	var err error
	for wait := time.Millisecond; ; wait *= 2 {
		if err = os.Rename(from, to); err == nil || runtime.GOOS != "windows" || wait > 512*time.Millisecond {
			return err
		}
		time.Sleep(wait)
	}
}
