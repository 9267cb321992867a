// Package oauth signs mcp-mux in to remote MCP servers and keeps it signed
// in: `mcp-mux login`'s authorization code flow (the go-sdk's
// auth.AuthorizationCodeHandler, with a loopback redirect listener and the
// browser opener of this package), the sign-ins kept in the OS secret store
// (package secrets), and, while serving, tokens refreshed under a lock that
// every mcp-mux process of the user shares.
//
// Nothing here logs or prints a token, a code, a verifier or a client
// secret: errors name servers, issuers and OAuth error codes only.
package oauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/oauth2"

	"github.com/mcp-mux/mcp-mux/backends/secrets"
)

// Record is one sign-in: the tokens for one server URL, and what they
// belong to (the issuer that issued them, the client registration they
// were issued to, where to refresh them). It is stored as JSON whose
// "token" is golang.org/x/oauth2's Token.
type Record struct {
	ServerURL string `json:"server_url"`
	// Issuer is the authorization server's, as its metadata names it
	// (empty for a server without metadata, which the go-sdk reaches at
	// its predefined endpoints).
	Issuer string `json:"issuer,omitempty"`
	// Resource is the resource the tokens were asked for (RFC 8707): the
	// server's, as its protected resource metadata names it.
	Resource     string           `json:"resource,omitempty"`
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	TokenURL     string           `json:"token_url"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style,omitempty"`
	Scopes       []string         `json:"scopes,omitempty"`
	// Registration says how ClientID was had: "pre-registered",
	// "metadata document" or "dynamic".
	Registration string        `json:"registration,omitempty"`
	Token        *oauth2.Token `json:"token"`
	// Obtained is when Token was issued (by the sign-in or a refresh).
	Obtained time.Time `json:"obtained"`
}

// Signins is where sign-ins are kept: the secret store for the records,
// and a directory of the state dir for what is not secret and must be
// shared by every mcp-mux process (a lock per server, and a stamp that
// changes with every write, which a running mcp-mux watches).
type Signins struct {
	Store secrets.Store
	Dir   string
}

// Open is the user's sign-ins.
func Open() (*Signins, error) {
	st, err := secrets.Default()
	if err != nil {
		return nil, err
	}
	root, err := secrets.StateDir()
	if err != nil {
		return nil, err
	}
	// Made when something is written: a user without sign-ins gets no
	// directory.
	return &Signins{Store: st, Dir: filepath.Join(root, "oauth")}, nil
}

// ensureDir makes s.Dir, private.
func (s *Signins) ensureDir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("making %s: %w", s.Dir, err)
	}
	return nil
}

// id names serverURL's sign-in: keys of the secret store are visible
// (the Keychain lists them), and a URL may carry a secret in its query.
func id(serverURL string) string {
	sum := sha256.Sum256([]byte(serverURL))
	return hex.EncodeToString(sum[:16])
}

func key(serverURL string) string { return "oauth:" + id(serverURL) }

// Load is serverURL's sign-in, or nil if there is none.
func (s *Signins) Load(serverURL string) (*Record, error) {
	v, err := s.Store.Get(key(serverURL))
	if errors.Is(err, secrets.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal([]byte(v), &r); err != nil || r.Token == nil || r.ServerURL != serverURL {
		// Not one of ours, or from a future version: as if signed out.
		return nil, nil
	}
	return &r, nil
}

// Save stores r (replacing what was stored for its server) and changes
// the server's stamp.
func (s *Signins) Save(r *Record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := s.Store.Set(key(r.ServerURL), string(data)); err != nil {
		return fmt.Errorf("storing the sign-in: %w", err)
	}
	return s.touch(r.ServerURL)
}

// Delete removes serverURL's sign-in; found says whether there was one.
func (s *Signins) Delete(serverURL string) (found bool, err error) {
	err = s.Store.Delete(key(serverURL))
	if errors.Is(err, secrets.ErrNotFound) {
		return false, s.touch(serverURL)
	}
	if err != nil {
		return false, fmt.Errorf("removing the sign-in: %w", err)
	}
	return true, s.touch(serverURL)
}

// Where says where serverURL's sign-in is kept.
func (s *Signins) Where(serverURL string) string { return s.Store.Where(key(serverURL)) }

func (s *Signins) stampPath(serverURL string) string {
	return filepath.Join(s.Dir, id(serverURL)+".changed")
}

// touch writes a new stamp for serverURL: a running mcp-mux that waits for
// a sign-in (or holds an older token) reads it to know that the record
// changed, without asking the secret store.
func (s *Signins) touch(serverURL string) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	stamp := fmt.Sprintf("%d %s\n", time.Now().UnixNano(), rand.Text())
	p := s.stampPath(serverURL)
	tmp := p + ".new-" + rand.Text()[:8]
	if err := os.WriteFile(tmp, []byte(stamp), 0o600); err != nil {
		return fmt.Errorf("recording the sign-in's change: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("recording the sign-in's change: %w", err)
	}
	return nil
}

// Stamp is serverURL's stamp now ("" if it never changed).
func (s *Signins) Stamp(serverURL string) string {
	data, _ := os.ReadFile(s.stampPath(serverURL))
	return string(data)
}

// lockWait bounds waiting for another process's refresh.
const lockWait = 30 * time.Second

// Lock takes serverURL's lock, shared by every mcp-mux process of the
// user: a refresh holds it from reading the record to storing the new
// one, so that a rotating refresh token is used once.
func (s *Signins) Lock(ctx context.Context, serverURL string) (unlock func(), err error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	fl := flock.New(filepath.Join(s.Dir, id(serverURL)+".lock"), flock.SetPermissions(0o600))
	ok, err := fl.TryLockContext(ctx, 20*time.Millisecond)
	if err != nil || !ok {
		return nil, fmt.Errorf("another mcp-mux process holds the sign-in's lock: %w", errors.Join(err, ctx.Err()))
	}
	return func() { fl.Unlock(); fl.Close() }, nil
}
