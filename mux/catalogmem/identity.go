package catalogmem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"maps"
	"slices"
)

// Identity is what makes a backend: a change of any field is another
// backend, since it may offer something else.
type Identity struct {
	Name      string
	Command   string
	Args      []string
	URL       string
	Cwd       string
	Protocol  string
	Transport string
	// InheritEnv names the variables of mcp-mux's own environment the
	// backend gets; their order does not matter.
	InheritEnv []string
	// Env and Headers hold secrets in their values: only hashes of the
	// values reach the key. The key is unsalted, so that every process
	// finds the same one: whoever holds the files and knows every other
	// field could test guesses at a short secret, never at a real token.
	Env     map[string]string
	Headers map[string]string
}

// Key is a stable hex name for id, that of its backend's file. Map
// order and nil or empty slices and maps make no difference.
func (id Identity) Key() string {
	k := keyHash{h: sha256.New()}
	k.string("mcp-mux catalog key 1")
	for _, s := range []string{id.Name, id.Command, id.URL, id.Cwd, id.Protocol, id.Transport} {
		k.string(s)
	}
	k.strings(id.Args)
	k.strings(slices.Sorted(slices.Values(id.InheritEnv)))
	k.secrets(id.Env)
	k.secrets(id.Headers)
	return hex.EncodeToString(k.h.Sum(nil))
}

// keyHash writes each part with its length, so that no two different
// identities write the same bytes (as "a b" + "" and "a" + "b" would,
// run together).
type keyHash struct{ h hash.Hash }

func (k keyHash) count(n int) {
	k.h.Write(binary.AppendUvarint(nil, uint64(n)))
}

func (k keyHash) string(s string) {
	k.count(len(s))
	io.WriteString(k.h, s)
}

func (k keyHash) strings(ss []string) {
	k.count(len(ss))
	for _, s := range ss {
		k.string(s)
	}
}

func (k keyHash) secrets(m map[string]string) {
	k.count(len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		k.string(name)
		sum := sha256.Sum256([]byte(m[name]))
		k.h.Write(sum[:])
	}
}
