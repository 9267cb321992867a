// Package instance names one mcp-mux among the instances of one config
// behind a load balancer, so that a current-era agent's retry that reaches
// another instance finds the call it answers. A handshake-era backend's
// call that asks a current-era agent for input is parked in the instance
// that started it (mux/rounds.go), and the agent gets a requestState that
// this package seals: it names the instance that holds the call (an id
// made at start, and the address its peers reach it at) and a key that is
// random.
//
// The seal is an HMAC whose key derives from the config's bearer tokens
// (http_token and the [[token]] values), which every instance of a team
// shares and no agent can read back from what it is sent. An instance
// forwards a retry, with the agent's own Authorization, only to an address
// a state it could open names: one no agent wrote. Without a token the key
// is the instance's own, random: its states open nowhere else, and a retry
// elsewhere is told to start again.
package instance

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/mux/config"
)

// Prefix starts every requestState mcp-mux makes: a retry that carries
// another is for a backend of the current era, whose own it is.
const Prefix = "mcp-mux."

// StartAgain ends every refusal of a requestState: what the agent does.
const StartAgain = "send the request again without inputResponses and requestState"

// HeldElsewhere is why a retry is refused whose call another instance
// holds, when that instance cannot be asked: gone, unreachable, or
// named with no address its peers reach.
const HeldElsewhere = "requestState names a call held by another mcp-mux instance, which did not answer"

// Refused is the error that refuses a retry's requestState for why, and
// tells the agent to start its call again: -32602 (invalid params), as
// every refusal of a requestState is.
func Refused(why string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: why + ": " + StartAgain}
}

// HandOffHeader marks a request one instance forwarded to another: the
// one it reaches does not forward it again.
const HandOffHeader = "Mcp-Mux-Handoff"

const (
	version = 1
	idLen   = 8
	keyLen  = 16
	macLen  = 16
)

// Seal makes and opens the requestStates of one instance.
type Seal struct {
	id     [idLen]byte
	key    []byte
	shared bool
	url    atomic.Pointer[string]
}

// New is the seal of an instance whose config has the bearer tokens
// secrets (empty ones ignored): its id is new, its key the same in every
// instance of the config.
func New(secrets ...string) *Seal {
	s := &Seal{}
	rand.Read(s.id[:])
	h := sha256.New()
	h.Write([]byte("mcp-mux requestState seal\x00"))
	for _, v := range secrets {
		if v != "" {
			s.shared = true
			h.Write([]byte(v))
			h.Write([]byte{0})
		}
	}
	if !s.shared {
		var own [32]byte
		rand.Read(own[:])
		h.Write(own[:])
	}
	s.key = h.Sum(nil)
	return s
}

// ForConfig is the seal of an instance serving cfg: its key derives from
// cfg's http_token and [[token]] values.
func ForConfig(cfg *config.File) *Seal {
	secrets := []string{cfg.Mux.HTTPToken}
	for _, t := range cfg.Tokens {
		secrets = append(secrets, t.Value)
	}
	return New(secrets...)
}

// Shared reports whether other instances of the config can open this
// one's states (the config has a token).
func (s *Seal) Shared() bool { return s.shared }

// Advertise makes url ("http://host:port") the address this instance's
// states name, where its peers reach it.
func (s *Seal) Advertise(url string) {
	url = strings.TrimRight(url, "/")
	s.url.Store(&url)
}

// URL is the address Advertise gave, or "".
func (s *Seal) URL() string {
	if p := s.url.Load(); p != nil {
		return *p
	}
	return ""
}

// NewState is a requestState that names this instance as the holder of a
// call: unguessable, and distinct from every other.
func (s *Seal) NewState() string {
	url := s.URL()
	b := make([]byte, 0, 1+idLen+keyLen+len(url)+macLen)
	b = append(b, version)
	b = append(b, s.id[:]...)
	var key [keyLen]byte
	rand.Read(key[:])
	b = append(b, key[:]...)
	b = append(b, url...)
	b = append(b, s.mac(b)...)
	return Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// Holder is what an opened state says of the instance that holds its call.
type Holder struct {
	Here bool   // this instance
	URL  string // where its peers reach it; "" if it said none
}

// ErrNotOurs is the error of a state this instance cannot open: made by
// an instance of another config (another token), or changed since.
var ErrNotOurs = errors.New("requestState is not this mcp-mux's (sealed by an instance of another config, or changed)")

// Open checks state's seal and says who holds its call.
func (s *Seal) Open(state string) (Holder, error) {
	rest, ok := strings.CutPrefix(state, Prefix)
	if !ok {
		return Holder{}, ErrNotOurs
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) < 1+idLen+keyLen+macLen || b[0] != version {
		return Holder{}, ErrNotOurs
	}
	body, mac := b[:len(b)-macLen], b[len(b)-macLen:]
	if !hmac.Equal(mac, s.mac(body)) {
		return Holder{}, ErrNotOurs
	}
	return Holder{
		Here: string(body[1:1+idLen]) == string(s.id[:]),
		URL:  string(body[1+idLen+keyLen:]),
	}, nil
}

func (s *Seal) mac(b []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(b)
	return m.Sum(nil)[:macLen]
}
