package wire

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestRecoverEnvelopeFindsTheIDOfAResponseOnly(t *testing.T) {
	big := strings.Repeat("x", 10000)
	cases := []struct {
		name, line string
		id         any // nil: not recognizably a response
	}{
		{"go-sdk order", `{"jsonrpc":"2.0","id":7,"result":{}}`, int64(7)},
		{"TypeScript order", `{"result":{"a":[1,{"id":99}]},"jsonrpc":"2.0","id":8}`, int64(8)},
		{"string id", `{"jsonrpc":"2.0","id":"a\"b","error":{"code":"x"}}`, `a"b`},
		{"spaces", ` { "JSONRPC" : "2.0" , "id" : 9 , "result" : {} } `, int64(9)},
		{"nested id is not the id", `{"jsonrpc":"2.0","result":{"id":5}}`, nil},
		{"id in a string is not the id", `{"jsonrpc":"2.0","result":"\",\"id\":5,\""}`, nil},
		{"request", `{"jsonrpc":"2.0","id":1,"method":5}`, nil},
		{"id is an object", `{"jsonrpc":"2.0","id":{},"result":{}}`, nil},
		{"id is true", `{"jsonrpc":"2.0","id":true,"result":{}}`, nil},
		{"id is null", `{"jsonrpc":"2.0","id":null,"result":{}}`, nil},
		{"a backend's JSON log line", `{"level":"info","id":3,"msg":"hello"}`, nil},
		{"not an object", `[{"jsonrpc":"2.0","id":1,"result":{}}]`, nil},
		{"cut number", `{"jsonrpc":"2.0","id":12`, nil},
		{"deep", `{"jsonrpc":"2.0","id":4,"result":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, int64(4)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := recoverEnvelope([]byte(tc.line), []byte(tc.line))
			if tc.id == nil {
				if e.isResponse() {
					t.Errorf("taken for a response to %v", e.id.Raw())
				}
				return
			}
			if !e.isResponse() || e.id.Raw() != tc.id {
				t.Errorf("got response=%v id=%#v, want id %#v", e.isResponse(), e.id.Raw(), tc.id)
			}
		})
	}

	// Of an oversized line only the head and the tail are kept (4 KiB each,
	// as backends keeps them).
	const headKeep, tailKeep = 4096, 4096
	headTail := func(line string) envelope {
		return recoverEnvelope([]byte(line[:min(len(line), headKeep)]), []byte(line[max(0, len(line)-tailKeep):]))
	}
	for _, tc := range []struct {
		name, line string
		id         any
	}{
		{"id in head", `{"jsonrpc":"2.0","id":11,"result":{"text":"` + big + `"}}`, int64(11)},
		{"id in tail", `{"result":{"text":"` + big + `"},"jsonrpc":"2.0","id":"s-12"}`, "s-12"},
		{"tail starts in a run of backslashes", `{"result":{"text":"` + big + strings.Repeat(`\\`, 3000) + `"},"jsonrpc":"2.0","id":13}`, int64(13)},
		{"request in head", `{"jsonrpc":"2.0","id":14,"method":"x","params":{"text":"` + big + `"}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := headTail(tc.line)
			if tc.id == nil {
				if e.isResponse() {
					t.Errorf("taken for a response to %v", e.id.Raw())
				}
				return
			}
			if !e.isResponse() || e.id.Raw() != tc.id {
				t.Errorf("got response=%v id=%#v, want id %#v", e.isResponse(), e.id.Raw(), tc.id)
			}
		})
	}
}

func TestScalarIDMatchesTheDecoder(t *testing.T) {
	for _, v := range []string{`1`, `-3`, `1.5`, `1e3`, `"x"`, `"\u00e9"`, `1e400`, `true`, `{}`, `"open`} {
		line := `{"jsonrpc":"2.0","id":` + v + `,"result":{}}`
		msg, err := jsonrpc.DecodeMessage([]byte(line))
		e := recoverEnvelope([]byte(line), []byte(line))
		if err != nil {
			if e.hasID && v != `"open` {
				// The decoder refused the id itself: nothing to answer.
				t.Errorf("%s: decoder refused (%v) but recovered id %#v", v, err, e.id.Raw())
			}
			continue
		}
		if want := msg.(*jsonrpc.Response).ID; !e.hasID || e.id != want {
			t.Errorf("%s: recovered %#v, decoder %#v", v, e.id.Raw(), want.Raw())
		}
	}
}

// FuzzStringEndMatchesAByteScan: stringEnd, which jumps from quote to
// quote, ends every string where reading it byte by byte does.
func FuzzStringEndMatchesAByteScan(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b"`, `"a\\"b"`, `"a\\\"b"`, `"\\\\"`, `"\`, `"abc`, `""`, `"\"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) == 0 || s[0] != '"' {
			return
		}
		want := -1
		for j := 1; j < len(s); j++ {
			if s[j] == '\\' {
				j++
			} else if s[j] == '"' {
				want = j + 1
				break
			}
		}
		if got := stringEnd([]byte(s), 0); got != want {
			t.Fatalf("stringEnd(%q) = %d, want %d", s, got, want)
		}
	})
}
