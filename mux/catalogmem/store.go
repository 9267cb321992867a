package catalogmem

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

const (
	// fileVersion tells this format from another, which is read as no
	// file at all: 1 was the single file of every backend, which is
	// never read.
	fileVersion = 2

	// maxEntryBytes keeps each process's memory bounded whatever a
	// backend sends: a Store holds the catalogs of the backends it looked
	// up or put.
	maxEntryBytes = 8 << 20

	// maxRecordBytes bounds what is read of one file: the catalogs and,
	// beside them, the version, the name and when each was seen.
	maxRecordBytes = maxEntryBytes + 64<<10

	// maxVariants bounds the catalogs remembered of one backend, one per
	// set of client capabilities it was seen with (Entry.ClientCapabilities):
	// a user's few agents, each declaring its own.
	maxVariants = 4

	// refreshAfter is how old a remembered catalog may grow before an
	// unchanged one is written again, to mark it recently seen (and so
	// keep it from eviction) without a write on every run.
	refreshAfter = 24 * time.Hour
)

// The directory's bounds, vars so that a test can lower them.
var (
	// maxBackends bounds the directory to the backends most recently
	// seen: a user who tries many servers over the years should not carry
	// them all.
	maxBackends = 200

	// maxFileBytes bounds the disk the files take, in all.
	maxFileBytes int64 = 32 << 20
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
	// ClientCapabilities is what the backend was told of its client when
	// it offered this, as far as that may change what it offers (Shape):
	// a backend has a catalog remembered for each it was seen with.
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"`
	// Seen is when the backend offered this; a Put of a zero Seen means
	// now. It is remembered to the day: an unchanged catalog is written
	// again only a day after it last was.
	Seen time.Time `json:"-"`
	// Failure is its last start, if that failed after this was seen
	// (NoteFailure); a Put forgets it.
	Failure *Failure `json:"-"`
}

// Failure is a backend's last start that failed: when, and why on one
// line. A start that works forgets it.
type Failure struct {
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// record is one backend's file, <Key>.json. Its key is its file's name:
// nothing else of the Identity but the name is written.
type record struct {
	Version int             `json:"version"`
	Name    string          `json:"name,omitempty"` // for a person reading the file
	Seen    time.Time       `json:"seen"`
	Catalog json.RawMessage `json:"catalog"` // an Entry, encoded by encodeEntry; none: not remembered
	Failure *Failure        `json:"failure,omitempty"`
	// Others are what it offered clients of other capabilities, the most
	// recently seen first; Catalog is the one seen last of all. An older
	// mcp-mux reads Catalog only, and its write drops them.
	Others []variant `json:"others,omitempty"`

	unsaved bool // a write of it failed: the next Put writes again
}

// Store is the remembered catalogs, one file per backend in a directory;
// safe for concurrent use. It reads a backend's file when that backend is
// first looked up or put, and holds only those: its memory is its own
// backends', whatever the directory holds. Another process's write of a
// backend already read is not seen.
type Store struct {
	dir string // "": remembered for this run only

	// legacy is the single file of every backend that an older mcp-mux
	// kept beside the default directory, removed by the first write; ""
	// once removed, or for a directory other than the default.
	legacy string

	writeMu sync.Mutex // serializes this Store's writes, so that Lookup need not wait for the disk

	mu      sync.Mutex
	entries map[string]record // by Identity.Key: the backends read or put, a nil Catalog for none
}

// DirFrom is the directory a value of MCP_MUX_CATALOGS names: "" for
// DefaultPath, "off" for none (""). Any other value must be an absolute
// path: a relative one would depend on where the agent happens to start
// mcp-mux, and is most often a typo ("of"); it is none, with an error that
// says why.
func DirFrom(env string) (string, error) {
	switch {
	case env == "":
		return DefaultPath(), nil
	case env == "off":
		return "", nil
	case filepath.IsAbs(env):
		return env, nil
	}
	return "", fmt.Errorf("MCP_MUX_CATALOGS=%q is neither \"off\" nor an absolute path: nothing is remembered (write an absolute directory, or off, or unset it for %s)", env, cmp.Or(DefaultPath(), "the user's cache directory"))
}

// DefaultPath is the directory in the user's cache directory, or "" if
// there is none.
func DefaultPath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mcp-mux", "catalogs")
}

// Open is the store in the directory dir, which it creates at its first
// write. It reads nothing until a backend is looked up or put. With dir ""
// nothing outlives the Store.
func Open(dir string) *Store {
	s := &Store{dir: dir, entries: map[string]record{}}
	if dir != "" && dir == DefaultPath() {
		// mcp-mux before the directory kept every backend in one file,
		// catalogs.json beside it: that file is removed, not read, so
		// that each backend is started once more after the upgrade to be
		// remembered in the directory; one cold start.
		s.legacy = filepath.Join(filepath.Dir(dir), "catalogs.json")
	}
	return s
}

// variant is a catalog of a record other than the one seen last.
type variant struct {
	Seen               time.Time       `json:"seen"`
	ClientCapabilities json.RawMessage `json:"clientCapabilities,omitempty"` // its Entry's, to find it without decoding it
	Catalog            json.RawMessage `json:"catalog"`
}

// Lookup returns what the backend id offered when last seen, whatever
// client it offered it to.
func (s *Store) Lookup(id Identity) (Entry, bool) {
	r := s.load(id.Key())
	return decodeEntry(r.Catalog, r.Seen, r.Failure)
}

// LookupFor returns what the backend id offered when last seen by a
// client of the capabilities caps (as Entry.ClientCapabilities says them).
func (s *Store) LookupFor(id Identity, caps json.RawMessage) (Entry, bool) {
	r := s.load(id.Key())
	if e, ok := decodeEntry(r.Catalog, r.Seen, r.Failure); !ok || SameJSON(e.ClientCapabilities, caps) {
		return e, ok
	}
	for _, v := range r.Others {
		if SameJSON(v.ClientCapabilities, caps) {
			return decodeEntry(v.Catalog, v.Seen, r.Failure)
		}
	}
	return Entry{}, false
}

// Shapes are the client capabilities (as Entry.ClientCapabilities says
// them) of every catalog remembered of the backend id, the one seen last
// first.
func (s *Store) Shapes(id Identity) []json.RawMessage {
	r := s.load(id.Key())
	if len(r.Catalog) == 0 {
		return nil
	}
	out := []json.RawMessage{capsOf(r.Catalog)}
	for _, v := range r.Others {
		out = append(out, v.ClientCapabilities)
	}
	return out
}

func decodeEntry(catalog json.RawMessage, seen time.Time, f *Failure) (Entry, bool) {
	if len(catalog) == 0 {
		return Entry{}, false
	}
	var e Entry
	if json.Unmarshal(catalog, &e) != nil {
		return Entry{}, false
	}
	e.Seen, e.Failure = seen, f
	return e, true
}

// SameJSON reports whether a and b are the same JSON but for space.
func SameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// capsOf is the ClientCapabilities of an encoded Entry.
func capsOf(catalog json.RawMessage) json.RawMessage {
	var e struct {
		ClientCapabilities json.RawMessage `json:"clientCapabilities"`
	}
	json.Unmarshal(catalog, &e)
	return e.ClientCapabilities
}

// maxReasonBytes bounds the reason of a Failure kept.
const maxReasonBytes = 500

// minSecretLen is the shortest env or header value NoteFailure hides: a
// shorter one ("1", "true") is a setting, and hiding it would garble the
// words it occurs in.
const minSecretLen = 6

// NoteFailure remembers that the backend id failed to start, beside what
// it offered when last seen: that catalog is no longer what it will list.
// Nothing is noted of a backend not remembered. Every value of id's env
// and headers that the reason quotes is hidden: a server may quote its
// configuration in its error.
func (s *Store) NoteFailure(id Identity, f Failure) error {
	for _, vals := range []map[string]string{id.Env, id.Headers} {
		for _, v := range vals {
			if len(v) >= minSecretLen {
				f.Reason = strings.ReplaceAll(f.Reason, v, "***")
			}
		}
	}
	if len(f.Reason) > maxReasonBytes {
		f.Reason = strings.ToValidUTF8(f.Reason[:maxReasonBytes], "") + "…"
	}
	key := id.Key()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	r := s.load(key)
	if len(r.Catalog) == 0 {
		return nil
	}
	r.Failure = &f
	var err error
	if s.dir != "" {
		if err = s.write(key, r); err != nil {
			r.unsaved = true
		}
	}
	s.mu.Lock()
	s.entries[key] = r
	s.mu.Unlock()
	return err
}

// load returns what is remembered under key, reading its file the first
// time only.
func (s *Store) load(key string) record {
	s.mu.Lock()
	r, ok := s.entries[key]
	s.mu.Unlock()
	if ok || s.dir == "" {
		return r
	}
	r = readRecord(s.file(key))
	s.mu.Lock()
	defer s.mu.Unlock()
	// A Put or Forget meanwhile knows better than what was read.
	if known, ok := s.entries[key]; ok {
		return known
	}
	s.entries[key] = r
	return r
}

func (s *Store) file(key string) string {
	return filepath.Join(s.dir, key+".json")
}

// Put remembers that the backend id offered e to a client of
// e.ClientCapabilities, and reports whether that differs from what was
// remembered for those (or nothing was); what it offered clients of other
// capabilities stays remembered, up to maxVariants catalogs in all. The
// backend's file is written only when it differs, or is not the one seen
// last, or a day after it was last written. A catalog too large to
// remember (ErrTooLarge) makes the Store forget id, since what it
// remembered is no longer what the backend offers.
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
	r := record{Version: fileVersion, Name: id.Name, Seen: e.Seen, Catalog: catalog}
	if r.Seen.IsZero() {
		r.Seen = time.Now()
	}

	old := s.load(key)
	prev, others, wasLast := old.Catalog, old.Others, true
	if len(old.Catalog) > 0 && !SameJSON(capsOf(old.Catalog), e.ClientCapabilities) {
		// Another client's catalog was seen last: it is kept as one of
		// the others, and this one's earlier catalog, if any, is replaced.
		prev, wasLast = nil, false
		others = []variant{{Seen: old.Seen, ClientCapabilities: capsOf(old.Catalog), Catalog: old.Catalog}}
		for _, v := range old.Others {
			if SameJSON(v.ClientCapabilities, e.ClientCapabilities) {
				prev = v.Catalog
				continue
			}
			others = append(others, v)
		}
	}
	r.Others = boundVariants(others, len(catalog))
	changed = len(prev) == 0 || !bytes.Equal(prev, catalog)
	if !changed && wasLast && !old.unsaved && old.Failure == nil && r.Seen.Sub(old.Seen) < refreshAfter {
		return false, nil
	}
	if s.dir == "" {
		s.mu.Lock()
		s.entries[key] = r
		s.mu.Unlock()
		return changed, nil
	}

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err = s.write(key, r)
	if err != nil {
		r.unsaved = true
	}
	s.mu.Lock()
	s.entries[key] = r
	s.mu.Unlock()
	if err == nil && s.legacy != "" {
		// Gone or not, it is not tried again: an older mcp-mux still
		// running may write it back, and that is its business.
		os.Remove(s.legacy)
		os.Remove(s.legacy + ".lock")
		s.legacy = ""
	}
	return changed, err
}

// boundVariants is as many of others as fit beside a catalog of size
// bytes: maxVariants catalogs, maxEntryBytes, in all.
func boundVariants(others []variant, size int) []variant {
	var out []variant
	for _, v := range others {
		size += len(v.Catalog)
		if len(out)+1 >= maxVariants || size > maxEntryBytes {
			break
		}
		out = append(out, v)
	}
	return out
}

// write replaces key's file with r, and keeps the directory in its bounds
// if the file is new or grew.
func (s *Store) write(key string, r record) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create the catalogs' directory: %w", err)
	}
	data, err := encodeRecord(r)
	if err != nil {
		return fmt.Errorf("encode the remembered catalog: %w", err)
	}
	path := s.file(key)
	fi, statErr := os.Stat(path)
	if err := writeAtomically(path, data, r.Seen); err != nil {
		return err
	}
	if statErr != nil || fi.Size() < int64(len(data)) {
		s.prune(key)
	}
	return nil
}

// Forget drops what the backend id offered, so that it is learned afresh.
func (s *Store) Forget(id Identity) error {
	key := id.Key()
	if s.dir == "" {
		s.mu.Lock()
		delete(s.entries, key)
		s.mu.Unlock()
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.mu.Lock()
	s.entries[key] = record{}
	s.mu.Unlock()
	if err := os.Remove(s.file(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forget the remembered catalog: %w", err)
	}
	return nil
}

// prune keeps the maxBackends most recently seen backends of the
// directory, as many as fit in maxFileBytes; keep, the one just put, stays
// whatever its time. A file's time is when its backend was last seen,
// which every write sets. What is not a backend's file is left alone, and
// what cannot be removed (another process reading it, on Windows) is left
// for the next prune.
func (s *Store) prune(keep string) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	type file struct {
		key  string
		seen time.Time
		size int64
	}
	var files []file
	var kept *file
	for _, de := range entries {
		key, ok := keyOf(de.Name())
		if !ok || !de.Type().IsRegular() {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		f := file{key, fi.ModTime(), fi.Size()}
		if key == keep {
			kept = &f
			continue
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b file) int {
		if c := b.seen.Compare(a.seen); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	if kept != nil {
		files = append([]file{*kept}, files...)
	}
	var size int64
	for i, f := range files {
		size += f.size
		if i < maxBackends && size <= maxFileBytes || f.key == keep {
			continue
		}
		if os.Remove(s.file(f.key)) == nil {
			s.mu.Lock()
			delete(s.entries, f.key)
			s.mu.Unlock()
		}
	}
}

// keyOf is the key of a backend's file name, <64 hex digits>.json.
func keyOf(name string) (string, bool) {
	key, ok := strings.CutSuffix(name, ".json")
	if !ok || len(key) != 64 {
		return "", false
	}
	for _, c := range []byte(key) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return key, true
}

// readRecord returns the backend the file at path holds, none if it is
// missing, damaged, too large or of another version.
func readRecord(path string) record {
	f, err := os.Open(path)
	if err != nil {
		return record{}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() > maxRecordBytes {
		return record{}
	}
	b := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	if _, err := b.ReadFrom(io.LimitReader(f, maxRecordBytes+1)); err != nil || b.Len() > maxRecordBytes {
		return record{}
	}
	var r record
	if json.Unmarshal(b.Bytes(), &r) != nil || r.Version != fileVersion ||
		len(r.Catalog) == 0 || len(r.Catalog) > maxEntryBytes || r.Catalog[0] != '{' {
		return record{}
	}
	r.Others = slices.DeleteFunc(r.Others, func(v variant) bool { return len(v.Catalog) == 0 || v.Catalog[0] != '{' })
	r.Others = boundVariants(r.Others, len(r.Catalog))
	return r
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

func encodeRecord(r record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeAtomically replaces path with data, its time set to seen, so that
// a reader sees either the old file or the new one, never part of one. The
// file is the user's business (what their backends offer): 0600, as
// CreateTemp makes it.
func writeAtomically(path string, data []byte, seen time.Time) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".catalog-*")
	if err != nil {
		return fmt.Errorf("write the remembered catalog: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		// Without it a crash soon after the rename may leave an empty
		// file on some file systems, losing the backend's catalog.
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// Its time is when the backend was seen, by which the least
		// recently seen are evicted; a rename keeps it.
		err = os.Chtimes(f.Name(), time.Time{}, seen)
	}
	if err == nil {
		err = rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write the remembered catalog: %w", err)
	}
	return nil
}

// rename is os.Rename, tried again for a while where it is refused: on
// Windows a file another process is reading (a Lookup, which takes no
// lock) cannot be replaced until it is closed, and that is a matter of
// milliseconds.
func rename(from, to string) error {
	var err error
	for wait := time.Millisecond; ; wait *= 2 {
		if err = os.Rename(from, to); err == nil || runtime.GOOS != "windows" || wait > 512*time.Millisecond {
			return err
		}
		time.Sleep(wait)
	}
}
