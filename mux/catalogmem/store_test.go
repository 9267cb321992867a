package catalogmem

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func catalogPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "mcp-mux", "catalogs")
}

// fileOf is the file of the backend id in the directory dir.
func fileOf(dir string, id Identity) string {
	return filepath.Join(dir, id.Key()+".json")
}

// backendFiles are the names of the backends' files in dir.
func backendFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if _, ok := keyOf(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	return names
}

// lower sets *v to n for the test.
func lower[T any](t *testing.T, v *T, n T) {
	old := *v
	*v = n
	t.Cleanup(func() { *v = old })
}

func sampleEntry() Entry {
	return Entry{
		ServerInfo:      json.RawMessage(`{"name":"github","version":"1.2.0"}`),
		ProtocolVersion: "2025-06-18",
		Capabilities:    json.RawMessage(`{"tools":{"listChanged":true},"prompts":{}}`),
		Instructions:    "Use <search> before & after.",
		Tools: []json.RawMessage{
			json.RawMessage(`{"name":"search","description":"a <b> & c","inputSchema":{"type":"object"},"_meta":{"ui/resourceUri":"ui://x","n":1.50}}`),
			json.RawMessage(`{"name":"get","inputSchema":{"type":"object"}}`),
		},
		Prompts:   []json.RawMessage{json.RawMessage(`{"name":"review","_meta":{"k":"v"}}`)},
		Resources: []json.RawMessage{json.RawMessage(`{"uri":"file:///a","name":"a"}`)},
		Templates: []json.RawMessage{json.RawMessage(`{"uriTemplate":"file:///{p}","name":"f"}`)},
	}
}

func identityN(i int) Identity {
	return Identity{Name: fmt.Sprintf("b%d", i), Command: "server", Args: []string{fmt.Sprint(i)}}
}

// sameCatalog compares two entries as they would be written, Seen aside.
func sameCatalog(t *testing.T, got, want Entry) bool {
	t.Helper()
	a, err := encodeEntry(got)
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodeEntry(want)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(a, b)
}

func TestPutIsFoundByAnotherRun(t *testing.T) {
	path := catalogPath(t)
	id, e := sampleIdentity(), sampleEntry()
	changed, err := Open(path).Put(id, e)
	if err != nil || !changed {
		t.Fatalf("Put of a backend never seen = %v, %v; want true, nil", changed, err)
	}

	got, ok := Open(path).Lookup(id)
	if !ok {
		t.Fatal("a new Store does not find what the last one put")
	}
	if !sameCatalog(t, got, e) {
		t.Errorf("Lookup = %+v, want %+v", got, e)
	}
	// The backend's bytes, as it sent them: an agent may compare or hash them.
	if string(got.Tools[0]) != string(e.Tools[0]) || got.Instructions != e.Instructions {
		t.Errorf("tool = %s, instructions = %q; want them unchanged: %s, %q", got.Tools[0], got.Instructions, e.Tools[0], e.Instructions)
	}
	if time.Since(got.Seen) > time.Minute || got.Seen.After(time.Now()) {
		t.Errorf("Seen = %v, want about now", got.Seen)
	}

	other := sampleIdentity()
	other.Env["GITHUB_TOKEN"] = "another"
	if _, ok := Open(path).Lookup(other); ok {
		t.Error("a backend with another env value finds the first one's catalog")
	}
}

func TestLookupGivesACopy(t *testing.T) {
	s := Open(catalogPath(t))
	id := sampleIdentity()
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Lookup(id)
	got.Tools[0][2] = 'X'
	again, _ := s.Lookup(id)
	if !sameCatalog(t, again, sampleEntry()) {
		t.Errorf("changing what Lookup returned changed the Store: %s", again.Tools[0])
	}
}

func TestLookupReadsTheFileOnce(t *testing.T) {
	dir := catalogPath(t)
	id := sampleIdentity()
	if _, err := Open(dir).Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	s := Open(dir)
	if _, ok := s.Lookup(id); !ok {
		t.Fatal("Lookup does not find what another Store put")
	}
	// Gone from the disk, it is still what this Store read.
	if err := os.Remove(fileOf(dir, id)); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Lookup(id); !ok || !sameCatalog(t, got, sampleEntry()) {
		t.Error("a second Lookup read the file again")
	}
}

// A Store reads a backend's file when that backend is looked up, not
// before: what another process wrote of it meanwhile is what it finds.
func TestOpenReadsNothing(t *testing.T) {
	dir := catalogPath(t)
	w := Open(dir)
	a, b := identityN(1), identityN(2)
	for _, id := range []Identity{a, b} {
		if _, err := w.Put(id, sampleEntry()); err != nil {
			t.Fatal(err)
		}
	}
	s := Open(dir)
	if _, ok := s.Lookup(a); !ok {
		t.Fatal("a is not found")
	}
	e := sampleEntry()
	e.Instructions = "written after the Store was opened"
	if _, err := Open(dir).Put(b, e); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.Lookup(b); !ok || got.Instructions != e.Instructions {
		t.Errorf("b = %v, %q: want what was written of it before its Lookup, %q", ok, got.Instructions, e.Instructions)
	}
	if n := len(s.entries); n != 2 {
		t.Errorf("the Store holds %d backends, want the 2 it looked up", n)
	}
}

// Every mcp-mux process opens the store: its memory must be that of its
// own backends, not of every backend every config ever had.
func TestAStoreReadsOnlyItsOwnBackends(t *testing.T) {
	dir := catalogPath(t)
	w := Open(dir)
	const others, otherSize = 50, 200 << 10
	for i := range others {
		e := sampleEntry()
		e.Tools = append(e.Tools, json.RawMessage(`{"name":"big","description":"`+strings.Repeat("x", otherSize)+`"}`))
		if _, err := w.Put(identityN(i), e); err != nil {
			t.Fatal(err)
		}
	}
	id := sampleIdentity()
	if _, err := w.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := Open(dir)
	_, ok := s.Lookup(id)
	runtime.ReadMemStats(&after)
	if !ok {
		t.Fatal("the backend is not found")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("Open and one Lookup allocated %d bytes, beside %d other backends of %d KiB: want under 1 MiB",
			n, others, otherSize>>10)
	}
	if n := len(s.entries); n != 1 {
		t.Errorf("the Store holds %d backends, want the 1 looked up", n)
	}
}

func TestPutWritesOnlyWhatChangedOrADayOld(t *testing.T) {
	dir := catalogPath(t)
	s := Open(dir)
	id, e := sampleIdentity(), sampleEntry()
	path := fileOf(dir, id)
	day0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	e.Seen = day0
	if _, err := s.Put(id, e); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(day0) {
		t.Fatalf("the file's time is %v (%v), want when the backend was seen, %v", fi.ModTime(), err, day0)
	}

	// With the file gone, a write would bring it back.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	e.Seen = day0.Add(23 * time.Hour)
	if changed, err := s.Put(id, e); changed || err != nil {
		t.Errorf("Put of the same catalog = %v, %v; want false, nil", changed, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Put of the same catalog within a day wrote the file (%v)", err)
	}

	e.Seen = day0.Add(25 * time.Hour)
	if changed, err := s.Put(id, e); changed || err != nil {
		t.Errorf("Put of the same catalog a day later = %v, %v; want false, nil", changed, err)
	}
	got, ok := Open(dir).Lookup(id)
	if !ok || !got.Seen.Equal(e.Seen) {
		t.Fatalf("a day later, the file has %v, %v; want it seen at %v", ok, got.Seen, e.Seen)
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(e.Seen) {
		t.Errorf("a day later, the file's time is %v (%v), want %v", fi.ModTime(), err, e.Seen)
	}

	e.Seen = e.Seen.Add(time.Minute)
	e.Tools = e.Tools[:1]
	if changed, err := s.Put(id, e); !changed || err != nil {
		t.Errorf("Put of a catalog with a tool less = %v, %v; want true, nil", changed, err)
	}
	if got, _ := Open(dir).Lookup(id); len(got.Tools) != 1 {
		t.Errorf("the file has %d tools, want the 1 just put", len(got.Tools))
	}
}

func TestFileIsTheUsersOnly(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix permission bits")
	}
	dir := catalogPath(t)
	id := sampleIdentity()
	if _, err := Open(dir).Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{filepath.Dir(dir): 0o700, dir: 0o700, fileOf(dir, id): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s is %v, want %v", p, got, want)
		}
	}
}

func TestFileHoldsNoSecret(t *testing.T) {
	dir := catalogPath(t)
	id := sampleIdentity()
	secrets := []string{"ghp_Zq8r2LxW9vKd3TfYb7", "Bearer eyJhbGciOiJIUzI1NiJ9.sekrit"}
	id.Env = map[string]string{"GITHUB_TOKEN": secrets[0]}
	id.Headers = map[string]string{"Authorization": secrets[1]}
	s := Open(dir)
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(identityN(1), sampleEntry()); err != nil { // another backend, another file
		t.Fatal(err)
	}
	if err := s.Forget(identityN(2)); err != nil { // another write, by another path
		t.Fatal(err)
	}
	// Every file of the directory, its name and what it holds.
	var all strings.Builder
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&all, "%s\n%s\n", e.Name(), data)
	}
	data := all.String()
	lower := strings.ToLower(data)

	for _, secret := range secrets {
		b := []byte(secret)
		sum := sha256.Sum256(b)
		for what, enc := range map[string]string{
			"clear":          secret,
			"base64":         base64.StdEncoding.EncodeToString(b),
			"raw base64":     base64.RawStdEncoding.EncodeToString(b),
			"url base64":     base64.URLEncoding.EncodeToString(b),
			"raw url base64": base64.RawURLEncoding.EncodeToString(b),
		} {
			if strings.Contains(data, enc) {
				t.Errorf("the files hold secret %q in %s", secret, what)
			}
		}
		// Hex of either case; and the value's own hash, which would let
		// anyone holding the files test a guess at one secret alone.
		for what, enc := range map[string]string{"hex": hex.EncodeToString(b), "its sha256": hex.EncodeToString(sum[:])} {
			if strings.Contains(lower, enc) {
				t.Errorf("the files hold secret %q in %s", secret, what)
			}
		}
		// Any long run of the secret betrays it, not just the whole.
		if strings.Contains(data, secret[:8]) {
			t.Errorf("the files hold the start of secret %q", secret)
		}
	}
	// Names are not secrets, but nothing reads them back from the files,
	// and what is not written cannot leak: the files keep only the key.
	for _, name := range []string{"GITHUB_TOKEN", "Authorization"} {
		if strings.Contains(data, name) {
			t.Errorf("the files name %s", name)
		}
	}
	if got := backendFiles(t, dir); !slices.Contains(got, id.Key()+".json") || len(got) != len(entries) {
		t.Errorf("the directory holds %v, want the backend's key as a file's name, and nothing else", got)
	}
}

func TestFileHasAVersion(t *testing.T) {
	dir := catalogPath(t)
	id := sampleIdentity()
	if _, err := Open(dir).Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(fileOf(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]json.RawMessage
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	want, err := encodeEntry(sampleEntry())
	if err != nil {
		t.Fatal(err)
	}
	if string(f["version"]) != "2" || string(f["name"]) != `"gh"` || !bytes.Equal(f["catalog"], want) || len(f) != 4 {
		t.Errorf("the file is %s; want version 2, the name gh, when seen, and the catalog %s", data, want)
	}
}

func TestUnreadableFileIsNoneAndRewritten(t *testing.T) {
	id := sampleIdentity()
	old := record{Version: fileVersion, Name: "gh", Seen: time.Now(), Catalog: json.RawMessage(`{"instructions":"old"}`)}
	good, err := encodeRecord(old)
	if err != nil {
		t.Fatal(err)
	}
	oversized := old
	oversized.Catalog = json.RawMessage(`{"instructions":"` + strings.Repeat("x", maxEntryBytes) + `"}`)
	tooLarge, err := encodeRecord(oversized)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"truncated":      good[:len(good)/2],
		"garbage":        []byte("\x00\x01not json"),
		"empty":          {},
		"another shape":  []byte(`[1,2,3]`),
		"no catalog":     bytes.Replace(good, []byte(`"catalog"`), []byte(`"c"`), 1),
		"not an object":  bytes.Replace(good, []byte(`{"instructions":"old"}`), []byte(`"old"`), 1),
		"no version":     bytes.Replace(good, []byte(`"version":2`), []byte(`"v":2`), 1),
		"older version":  bytes.Replace(good, []byte(`"version":2`), []byte(`"version":1`), 1),
		"future version": bytes.Replace(good, []byte(`"version":2`), []byte(`"version":3`), 1),
		"too large":      tooLarge,
	} {
		t.Run(name, func(t *testing.T) {
			dir := catalogPath(t)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(fileOf(dir, id), content, 0o600); err != nil {
				t.Fatal(err)
			}
			s := Open(dir)
			if _, ok := s.Lookup(id); ok {
				t.Fatal("Lookup finds a backend in an unreadable file")
			}
			if changed, err := s.Put(id, sampleEntry()); !changed || err != nil {
				t.Fatalf("Put = %v, %v; want true, nil", changed, err)
			}
			if got, ok := Open(dir).Lookup(id); !ok || !sameCatalog(t, got, sampleEntry()) {
				t.Error("the file was not rewritten readable")
			}
		})
	}
}

func TestEvictsTheLeastRecentlySeen(t *testing.T) {
	lower(t, &maxBackends, 10)
	dir := catalogPath(t)
	s := Open(dir)
	// Not a backend's file: neither counted nor removed.
	others := []string{"notes.txt", strings.Repeat("A", 64) + ".json", ".catalog-123", identityN(99).Key()}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, name), time.Time{}, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(i int, seen time.Time) {
		t.Helper()
		e := sampleEntry()
		e.Seen = seen
		if _, err := s.Put(identityN(i), e); err != nil {
			t.Fatal(err)
		}
	}
	for i := range maxBackends {
		put(i, start.Add(time.Duration(i)*time.Minute))
	}
	// Backend 0, seen again (with another catalog, or it would not be
	// written within the day), is now the most recent; 1 the least.
	e := sampleEntry()
	e.Instructions = "new"
	e.Seen = start.Add(time.Duration(maxBackends) * time.Minute)
	if _, err := s.Put(identityN(0), e); err != nil {
		t.Fatal(err)
	}
	put(maxBackends, start.Add(time.Duration(maxBackends+1)*time.Minute))

	for _, store := range []*Store{s, Open(dir)} {
		if _, ok := store.Lookup(identityN(1)); ok {
			t.Error("the least recently seen backend is still remembered")
		}
		for _, i := range []int{0, 2, maxBackends - 1, maxBackends} {
			if _, ok := store.Lookup(identityN(i)); !ok {
				t.Errorf("backend %d is forgotten", i)
			}
		}
	}
	if n := len(backendFiles(t, dir)); n != maxBackends {
		t.Errorf("the directory holds %d backends, want %d", n, maxBackends)
	}
	for _, name := range others {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, not a backend's file, was removed: %v", name, err)
		}
	}

	// The one just put stays, however long ago it was seen.
	put(maxBackends+1, start.Add(-time.Hour))
	if _, ok := Open(dir).Lookup(identityN(maxBackends + 1)); !ok {
		t.Error("the backend just put was evicted")
	}
	if _, ok := Open(dir).Lookup(identityN(2)); ok {
		t.Error("the directory went past its bound")
	}
}

func TestEvictsPastTheBytesBound(t *testing.T) {
	dir := catalogPath(t)
	s := Open(dir)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(i int, e Entry) {
		t.Helper()
		e.Seen = start.Add(time.Duration(i) * time.Minute)
		if _, err := s.Put(identityN(i), e); err != nil {
			t.Fatal(err)
		}
	}
	put(0, sampleEntry())
	fi, err := os.Stat(fileOf(dir, identityN(0)))
	if err != nil {
		t.Fatal(err)
	}
	// Room for three files of the sample's size.
	lower(t, &maxFileBytes, 3*fi.Size()+fi.Size()/2)
	for i := 1; i < 3; i++ {
		put(i, sampleEntry())
	}
	if n := len(backendFiles(t, dir)); n != 3 {
		t.Fatalf("the directory holds %d backends, want 3", n)
	}
	put(3, sampleEntry())
	if _, ok := Open(dir).Lookup(identityN(0)); ok {
		t.Error("the least recently seen backend is still remembered past the bound")
	}
	// A file that grows is as good as a new one.
	bigger := sampleEntry()
	bigger.Instructions = strings.Repeat("y", int(fi.Size()))
	put(4, sampleEntry())
	put(2, bigger)
	for i, want := range map[int]bool{1: false, 2: true, 3: false, 4: true} {
		if _, ok := Open(dir).Lookup(identityN(i)); ok != want {
			t.Errorf("backend %d remembered: %v, want %v", i, ok, want)
		}
	}
}

func TestTooLargeIsNotRemembered(t *testing.T) {
	dir := catalogPath(t)
	s := Open(dir)
	id := sampleIdentity()
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	huge := sampleEntry()
	huge.Tools = append(huge.Tools, json.RawMessage(`{"name":"big","description":"`+strings.Repeat("x", maxEntryBytes)+`"}`))
	changed, err := s.Put(id, huge)
	if !errors.Is(err, ErrTooLarge) || !changed {
		t.Fatalf("Put of %d bytes = %v, %v; want true and ErrTooLarge", maxEntryBytes, changed, err)
	}
	// What was remembered is no longer what the backend offers.
	for _, store := range []*Store{s, Open(dir)} {
		if _, ok := store.Lookup(id); ok {
			t.Error("the backend's old catalog is still remembered")
		}
	}
	if names := backendFiles(t, dir); len(names) != 0 {
		t.Errorf("the directory holds %v, want nothing", names)
	}
}

func TestForget(t *testing.T) {
	dir := catalogPath(t)
	a, b := Open(dir), Open(dir)
	for i := range 2 {
		if _, err := a.Put(identityN(i), sampleEntry()); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := b.Lookup(identityN(0)); !ok {
		t.Fatal("another Store's backend is not found")
	}
	if err := b.Forget(identityN(0)); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Lookup(identityN(0)); ok {
		t.Error("Lookup finds a backend just forgotten")
	}
	if _, ok := b.Lookup(identityN(1)); !ok {
		t.Error("Forget made the Store lose another backend that another Store put")
	}
	if _, err := os.Stat(fileOf(dir, identityN(0))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the forgotten backend's file is still there (%v)", err)
	}
	if _, ok := Open(dir).Lookup(identityN(0)); ok {
		t.Error("a new Store finds a forgotten backend")
	}
	if err := b.Forget(identityN(7)); err != nil {
		t.Errorf("Forget of a backend never seen = %v", err)
	}
	if err := Open(filepath.Join(t.TempDir(), "none")).Forget(identityN(7)); err != nil {
		t.Errorf("Forget in a directory never made = %v", err)
	}
}

func TestNoPathRemembersForTheRunOnly(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := Open("")
	id := sampleIdentity()
	if changed, err := s.Put(id, sampleEntry()); !changed || err != nil {
		t.Fatalf("Put = %v, %v; want true, nil", changed, err)
	}
	if _, ok := s.Lookup(id); !ok {
		t.Error("Lookup does not find what was just put")
	}
	if changed, err := s.Put(id, sampleEntry()); changed || err != nil {
		t.Errorf("Put of the same catalog = %v, %v; want false, nil", changed, err)
	}
	if err := s.Forget(id); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(id); ok {
		t.Error("Lookup finds what was forgotten")
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("a Store without a path wrote %v", names)
	}
}

func TestFailedWriteIsRetried(t *testing.T) {
	// A file where the directory should be: no write can succeed.
	blocker := filepath.Join(t.TempDir(), "mcp-mux")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := Open(filepath.Join(blocker, "catalogs"))
	id := sampleIdentity()
	if _, err := s.Put(id, sampleEntry()); err == nil {
		t.Fatal("Put under a file succeeded")
	}
	if _, ok := s.Lookup(id); !ok {
		t.Error("a failed write loses the catalog for this run")
	}
	if _, err := s.Put(id, sampleEntry()); err == nil {
		t.Error("the same catalog again is not written again after a failed write")
	}
	// Once it can be written, it is, though it did not change.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.Put(id, sampleEntry()); changed || err != nil {
		t.Errorf("Put once the directory can be made = %v, %v; want false, nil", changed, err)
	}
	if _, ok := Open(filepath.Join(blocker, "catalogs")).Lookup(id); !ok {
		t.Error("the catalog whose write failed is not written by the next Put")
	}
}

// An older mcp-mux kept every backend in one file beside the default
// directory: the first write removes it, unread.
func TestTheOldSingleFileIsRemoved(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // Unix but Darwin
	t.Setenv("HOME", cache)           // Darwin: ~/Library/Caches
	t.Setenv("LocalAppData", cache)   // Windows
	dir := DefaultPath()
	if dir == "" || !strings.HasPrefix(dir, cache) {
		t.Skipf("the cache directory is not under $XDG_CACHE_HOME, $HOME or %%LocalAppData%% here: %q", dir)
	}
	old := []string{filepath.Join(filepath.Dir(dir), "catalogs.json"), filepath.Join(filepath.Dir(dir), "catalogs.json.lock")}
	elsewhere := filepath.Join(t.TempDir(), "catalogs.json")
	for _, p := range append(old, elsewhere) {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(`{"version":1,"backends":{}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Another directory than the default leaves what is beside it alone.
	if _, err := Open(filepath.Join(filepath.Dir(elsewhere), "catalogs")).Put(identityN(1), sampleEntry()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(elsewhere); err != nil {
		t.Errorf("a Put in another directory removed the catalogs.json beside it: %v", err)
	}

	s := Open(dir)
	if _, ok := s.Lookup(sampleIdentity()); ok {
		t.Fatal("a backend never put is found")
	}
	for _, p := range old {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone before any write: %v", p, err)
		}
	}
	if _, err := s.Put(sampleIdentity(), sampleEntry()); err != nil {
		t.Fatal(err)
	}
	for _, p := range old {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after the first write (%v)", p, err)
		}
	}
	if _, ok := Open(dir).Lookup(sampleIdentity()); !ok {
		t.Error("the backend put is not found in the default directory")
	}
}

func TestTwoStoresOnOneDirectoryLoseNothing(t *testing.T) {
	dir := catalogPath(t)
	stores := []*Store{Open(dir), Open(dir)}
	const perWriter = 20
	var wg sync.WaitGroup
	errs := make(chan error, 8*perWriter)
	shared := identityN(1000)
	for w := range 4 {
		s := stores[w%2]
		wg.Go(func() {
			for i := range perWriter {
				id := identityN(w*perWriter + i)
				if _, err := s.Put(id, sampleEntry()); err != nil {
					errs <- err
				}
				if _, ok := s.Lookup(id); !ok {
					errs <- fmt.Errorf("backend %s is not found right after its Put", id.Name)
				}
				// A backend they all run: each writes what it offered.
				e := sampleEntry()
				e.Instructions = fmt.Sprintf("writer %d, %d", w, i)
				if _, err := s.Put(shared, e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final := Open(dir)
	for i := range 4 * perWriter {
		if _, ok := final.Lookup(identityN(i)); !ok {
			t.Errorf("backend %d was lost", i)
		}
	}
	if e, ok := final.Lookup(shared); !ok || !strings.HasPrefix(e.Instructions, "writer ") {
		t.Errorf("the backend every writer put is %v, %q; want one's", ok, e.Instructions)
	}
}

// A failed start is kept beside the catalog, across opens, until a Put
// of the same, unchanged catalog forgets it; nothing is noted of a
// backend not remembered.
func TestAFailedStartIsRememberedUntilAPut(t *testing.T) {
	dir := catalogPath(t)
	id := identityN(1)
	s := Open(dir)
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Second)
	long := strings.Repeat("é", maxReasonBytes)
	if err := s.NoteFailure(id, Failure{At: at, Reason: long}); err != nil {
		t.Fatal(err)
	}
	e, ok := Open(dir).Lookup(id)
	if !ok || e.Failure == nil || !e.Failure.At.Equal(at) || len(e.Failure.Reason) > maxReasonBytes+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(e.Failure.Reason, "…")) {
		t.Fatalf("after NoteFailure, reopened: %v %+v", ok, e.Failure)
	}
	if !sameCatalog(t, e, sampleEntry()) {
		t.Error("NoteFailure changed the catalog")
	}
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	if e, _ := Open(dir).Lookup(id); e.Failure != nil {
		t.Errorf("a Put of the unchanged catalog kept the failure: %+v", e.Failure)
	}
	if err := s.NoteFailure(identityN(2), Failure{At: at, Reason: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := Open(dir).Lookup(identityN(2)); ok {
		t.Error("a failure of a backend not remembered made it remembered")
	}
	if names := backendFiles(t, dir); len(names) != 1 {
		t.Errorf("files: %v, want the one backend's", names)
	}

	// A server that quotes its configuration: no value reaches the file.
	id.Env = map[string]string{"TOKEN": "s3cret-env-4242", "DEBUG": "1"}
	id.Headers = map[string]string{"Authorization": "Bearer s3cret-header-4242"}
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteFailure(id, Failure{At: at, Reason: "TOKEN=s3cret-env-4242 refused; Authorization: Bearer s3cret-header-4242; DEBUG=1"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(fileOf(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "s3cret") || !strings.Contains(string(data), "DEBUG=1") {
		t.Errorf("the file of a failure quoting secrets:\n%s", data)
	}
}
