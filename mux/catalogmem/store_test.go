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
	"strings"
	"sync"
	"testing"
	"time"
)

func catalogPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "mcp-mux", "catalogs.json")
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

func TestPutWritesOnlyWhatChangedOrADayOld(t *testing.T) {
	path := catalogPath(t)
	s := Open(path)
	id, e := sampleIdentity(), sampleEntry()
	day0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	e.Seen = day0
	if _, err := s.Put(id, e); err != nil {
		t.Fatal(err)
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
	got, ok := Open(path).Lookup(id)
	if !ok || !got.Seen.Equal(e.Seen) {
		t.Fatalf("a day later, the file has %v, %v; want it seen at %v", ok, got.Seen, e.Seen)
	}

	e.Seen = e.Seen.Add(time.Minute)
	e.Tools = e.Tools[:1]
	if changed, err := s.Put(id, e); !changed || err != nil {
		t.Errorf("Put of a catalog with a tool less = %v, %v; want true, nil", changed, err)
	}
	if got, _ := Open(path).Lookup(id); len(got.Tools) != 1 {
		t.Errorf("the file has %d tools, want the 1 just put", len(got.Tools))
	}
}

func TestFileIsTheUsersOnly(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no Unix permission bits")
	}
	path := catalogPath(t)
	if _, err := Open(path).Put(sampleIdentity(), sampleEntry()); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{filepath.Dir(path): 0o700, path: 0o600} {
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
	path := catalogPath(t)
	id := sampleIdentity()
	secrets := []string{"ghp_Zq8r2LxW9vKd3TfYb7", "Bearer eyJhbGciOiJIUzI1NiJ9.sekrit"}
	id.Env = map[string]string{"GITHUB_TOKEN": secrets[0]}
	id.Headers = map[string]string{"Authorization": secrets[1]}
	s := Open(path)
	if _, err := s.Put(id, sampleEntry()); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(identityN(1)); err != nil { // another write, by another path
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lower := strings.ToLower(string(data))

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
			if strings.Contains(string(data), enc) {
				t.Errorf("the file holds secret %q in %s", secret, what)
			}
		}
		// Hex of either case; and the value's own hash, which would let
		// anyone holding the file test a guess at one secret alone.
		for what, enc := range map[string]string{"hex": hex.EncodeToString(b), "its sha256": hex.EncodeToString(sum[:])} {
			if strings.Contains(lower, enc) {
				t.Errorf("the file holds secret %q in %s", secret, what)
			}
		}
		// Any long run of the secret betrays it, not just the whole.
		if strings.Contains(string(data), secret[:8]) {
			t.Errorf("the file holds the start of secret %q", secret)
		}
	}
	// Names are not secrets, but nothing reads them back from the file,
	// and what is not written cannot leak: the file keeps only the key.
	for _, name := range []string{"GITHUB_TOKEN", "Authorization"} {
		if strings.Contains(string(data), name) {
			t.Errorf("the file names %s", name)
		}
	}
	if !strings.Contains(string(data), id.Key()) {
		t.Errorf("the file does not hold the backend's key")
	}
}

func TestFileHasAVersion(t *testing.T) {
	path := catalogPath(t)
	if _, err := Open(path).Put(sampleIdentity(), sampleEntry()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version  int                        `json:"version"`
		Backends map[string]json.RawMessage `json:"backends"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if f.Version != 1 || len(f.Backends) != 1 {
		t.Errorf("file has version %d and %d backends, want 1 and 1", f.Version, len(f.Backends))
	}
}

func TestUnreadableFileIsNoneAndRewritten(t *testing.T) {
	id := sampleIdentity()
	good, err := encodeFile(map[string]record{id.Key(): {Name: "gh", Seen: time.Now(), Catalog: json.RawMessage(`{"instructions":"old"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	future := bytes.Replace(good, []byte(`"version":1`), []byte(`"version":2`), 1)
	for name, content := range map[string][]byte{
		"truncated":      good[:len(good)/2],
		"garbage":        []byte("\x00\x01not json"),
		"empty":          {},
		"another shape":  []byte(`[1,2,3]`),
		"no version":     bytes.Replace(good, []byte(`"version":1`), []byte(`"v":1`), 1),
		"future version": future,
	} {
		t.Run(name, func(t *testing.T) {
			path := catalogPath(t)
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			s := Open(path)
			if _, ok := s.Lookup(id); ok {
				t.Fatal("Lookup finds a backend in an unreadable file")
			}
			other := identityN(1)
			if changed, err := s.Put(other, sampleEntry()); !changed || err != nil {
				t.Fatalf("Put = %v, %v; want true, nil", changed, err)
			}
			if _, ok := Open(path).Lookup(other); !ok {
				t.Error("the file was not rewritten readable")
			}
		})
	}
}

func TestEvictsTheLeastRecentlySeen(t *testing.T) {
	path := catalogPath(t)
	s := Open(path)
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
	e.Seen = start.Add(maxBackends * time.Minute)
	if _, err := s.Put(identityN(0), e); err != nil {
		t.Fatal(err)
	}
	put(maxBackends, start.Add((maxBackends+1)*time.Minute))

	for _, store := range []*Store{s, Open(path)} {
		if _, ok := store.Lookup(identityN(1)); ok {
			t.Error("the least recently seen backend is still remembered")
		}
		for _, i := range []int{0, 2, maxBackends - 1, maxBackends} {
			if _, ok := store.Lookup(identityN(i)); !ok {
				t.Errorf("backend %d is forgotten", i)
			}
		}
	}
	if n := len(readFile(path)); n != maxBackends {
		t.Errorf("the file holds %d backends, want %d", n, maxBackends)
	}
}

func TestTooLargeIsNotRemembered(t *testing.T) {
	path := catalogPath(t)
	s := Open(path)
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
	for _, store := range []*Store{s, Open(path)} {
		if _, ok := store.Lookup(id); ok {
			t.Error("the backend's old catalog is still remembered")
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 1<<20 {
		t.Errorf("the file is %v (%v), want small", fi.Size(), err)
	}
}

func TestForget(t *testing.T) {
	path := catalogPath(t)
	a, b := Open(path), Open(path)
	for i := range 2 {
		if _, err := a.Put(identityN(i), sampleEntry()); err != nil {
			t.Fatal(err)
		}
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
	if _, ok := Open(path).Lookup(identityN(0)); ok {
		t.Error("the file still holds a forgotten backend")
	}
	if err := b.Forget(identityN(7)); err != nil {
		t.Errorf("Forget of a backend never seen = %v", err)
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
	s := Open(filepath.Join(blocker, "catalogs.json"))
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
}

func TestTwoStoresOnOneFileLoseNothing(t *testing.T) {
	path := catalogPath(t)
	stores := []*Store{Open(path), Open(path)}
	const perWriter = 20
	var wg sync.WaitGroup
	errs := make(chan error, 4*perWriter)
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
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final := Open(path)
	for i := range 4 * perWriter {
		if _, ok := final.Lookup(identityN(i)); !ok {
			t.Errorf("backend %d was lost", i)
		}
	}
}
