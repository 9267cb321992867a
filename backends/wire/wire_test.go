package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var wireSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2,{"b":"c\"d"}]}}}`,
	`{"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"text","text":"hi"}]}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
	` { "id" : -7 , "jsonrpc" : "2.0" , "result" : [ ] } `,
	`{"result":{},"jsonrpc":"2.0","id":3}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`,
	`{"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","method":5}`, `{"JSONRPC":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":{},"result":{}}`, `{"jsonrpc":"2.0","id":true,"result":{}}`,
	`{"jsonrpc":"2.0","id":1.5,"result":{}}`, `{"jsonrpc":"2.0","id":1e3,"result":{}}`, `{"jsonrpc":"2.0","id":007,"result":{}}`,
	`{"jsonrpc":"2.0","id":"\u0041","method":"x"}`, `{"jsonrpc":"2.0","id":1,"method":"x","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{}} trailing`, `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":}}`, `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\xff"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":` + strings.Repeat(`[{"b":`, 499) + `1` + strings.Repeat("}]", 499) + `,"c":"[[["}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":` + strings.Repeat(`[{"b":`, 500) + `1` + strings.Repeat("}]", 500) + `}}`,
	strings.Repeat("[", 2000) + strings.Repeat("]", 2000), `{"jsonrpc":"2.0","id":123456789012345,"result":{}}`,
	`{"jsonrpc":"2.0","id":1234567890123456789,"result":{}}`, `{"jsonrpc":"2.0","method":"x","result":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"x"}`, `{"jsonrpc":"2.0","result":{}}`, `{}`, `[]`, `null`, ``,
}

// FuzzDecodeMessageMatchesTheSDK: for any line, DecodeMessage accepts it
// exactly when the go-sdk's decoder does, and makes the same message.
func FuzzDecodeMessageMatchesTheSDK(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		want, wantErr := jsonrpc.DecodeMessage([]byte(line))
		got, gotErr := DecodeMessage([]byte(line))
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: the SDK says %v, DecodeMessage %v", line, wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		if a, b := encode(t, want), encode(t, got); !bytes.Equal(a, b) {
			t.Fatalf("%q: the SDK made %s, DecodeMessage %s", line, a, b)
		}
	})
}

func encode(t *testing.T, m jsonrpc.Message) []byte {
	t.Helper()
	b, err := jsonrpc.EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(typeName(m)+" "), b...)
}

func typeName(m jsonrpc.Message) string {
	switch m := m.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			return "call"
		}
		return "notification"
	case *jsonrpc.Response:
		return "response"
	}
	return "?"
}

// The plain path must take what mcp-mux's traffic is made of, or it saves
// nothing.
func TestDecodeMessageTakesPlainMessagesItself(t *testing.T) {
	for _, s := range wireSeeds[:5] {
		if _, ok := decodePlain([]byte(s)); !ok {
			t.Errorf("not decoded on the plain path: %s", s)
		}
	}
}

func BenchmarkDecodeMessage(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 200) + `"}],"structuredContent":{"a":1}}}`)
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			jsonrpc.DecodeMessage(line)
		}
	})
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			DecodeMessage(line)
		}
	})
}

// FuzzObjectMembersMatchesEncodingJSON: for a valid JSON object whose keys
// are simple and each there once, ObjectMembers finds what encoding/json
// does, byte for byte; for any other valid input it declines (and never
// claims members encoding/json would not find).
func FuzzObjectMembersMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"echo","arguments":{"a":[1,"}",{"b":null}]},"_meta":{"progressToken":7}}`,
		` { "uri" : "file:///x\"y" , "n" : -1.5e3 , "t" : true , "z" : null } `,
		`{}`, `{"a":1,"a":2}`, `{"\u0061":1}`, `[1]`, `"s"`, `{"a":"\\"}`, `{"a":[]}`, `{"a":{}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		got, ok := ObjectMembers([]byte(s))
		var want map[string]json.RawMessage
		werr := json.Unmarshal([]byte(s), &want)
		if !ok {
			if werr == nil && want != nil && simpleKeysOnce(s) {
				t.Fatalf("%q: declined, encoding/json found %v", s, want)
			}
			return
		}
		if werr != nil || want == nil || len(got) != len(want) {
			t.Fatalf("%q: got %q, encoding/json %q (%v)", s, got, want, werr)
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("%q: member %q = %q, encoding/json %q", s, k, got[k], v)
			}
		}
	})
}

// FuzzAppendMembersMatchesObjectMembers: the two split every input alike
// (the same members, or both decline), past linearMembers too, where
// AppendMembers looks for a key twice in a map.
func FuzzAppendMembersMatchesObjectMembers(f *testing.F) {
	var many, manyTwice strings.Builder
	many.WriteString("{")
	for i := range 3 * linearMembers {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `"k%d":%d`, i, i)
	}
	manyTwice.WriteString(many.String() + `,"k40":0}`)
	many.WriteString("}")
	for _, s := range []string{
		`{"name":"echo","arguments":{"a":[1]},"_meta":{"progressToken":7}}`, `{}`, `{"a":1,"a":2}`,
		`{"\u0061":1}`, `[1]`, many.String(), manyTwice.String(), `{"k3":1,"k3":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		var buf [4]Member
		pre := Member{Key: []byte("before"), Value: json.RawMessage("0")}
		got, ok := AppendMembers(append(buf[:0], pre), []byte(s))
		want, wok := ObjectMembers([]byte(s))
		if ok != wok {
			t.Fatalf("%q: AppendMembers ok %v, ObjectMembers %v", s, ok, wok)
		}
		if string(got[0].Key) != "before" || (!ok && len(got) != 1) {
			t.Fatalf("%q: dst's own members not kept alone: %q", s, got)
		}
		if !ok {
			return
		}
		if len(got)-1 != len(want) {
			t.Fatalf("%q: %d members, ObjectMembers %d", s, len(got)-1, len(want))
		}
		for _, m := range got[1:] {
			if string(want[string(m.Key)]) != string(m.Value) || string(Lookup(got[1:], string(m.Key))) != string(m.Value) {
				t.Fatalf("%q: member %q = %q, ObjectMembers %q", s, m.Key, m.Value, want[string(m.Key)])
			}
		}
	})
}

// simpleKeysOnce reports whether the top-level object s has keys without
// escapes or non-printable bytes, each once.
func simpleKeysOnce(s string) bool {
	d := json.NewDecoder(strings.NewReader(s))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	seen := map[string]bool{}
	for d.More() {
		off := d.InputOffset()
		tok, err := d.Token()
		if err != nil {
			return false
		}
		key := tok.(string)
		raw := strings.TrimLeft(s[off:], " \t\r\n,")
		if !strings.HasPrefix(raw, `"`+key+`"`) || seen[key] {
			return false
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] >= 0x7f {
				return false
			}
		}
		seen[key] = true
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return false
		}
	}
	return true
}

// FuzzObjectMemberMatchesEncodingJSON: for a valid JSON object whose keys
// are simple and each there once, ObjectMember finds what encoding/json
// does, byte for byte; for any other valid input it declines or finds the
// same.
func FuzzObjectMemberMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"uri":"fixture://a/res/1","name":"r1","annotations":{"uri":"x"}}`,
		` { "name" : "n" , "uri" : "a\"b" } `, `{"uri":1,"uri":2}`, `{"\u0075ri":"x"}`,
		`{}`, `[{"uri":"x"}]`, `"uri"`, `{"a":[{"uri":"no"}]}`, `{"uri":null}`,
	} {
		f.Add(s, "uri")
	}
	f.Fuzz(func(t *testing.T, s, key string) {
		if !json.Valid([]byte(s)) {
			return
		}
		got, ok := ObjectMember([]byte(s), key)
		var want map[string]json.RawMessage
		werr := json.Unmarshal([]byte(s), &want)
		if !ok {
			if werr == nil && want != nil && simpleKeysOnce(s) {
				t.Fatalf("%q: declined, encoding/json found %q", s, want[key])
			}
			return
		}
		if werr != nil || want == nil {
			t.Fatalf("%q: found %q, encoding/json: %v", s, got, werr)
		}
		if w, has := want[key]; has != (got != nil) || string(got) != string(w) {
			t.Fatalf("%q: member %q = %q, encoding/json %q", s, key, got, w)
		}
	})
}

// FuzzArrayElementsMatchesEncodingJSON: ArrayElements splits a valid JSON
// array into the elements encoding/json finds, byte for byte, and declines
// anything else.
func FuzzArrayElementsMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`[{"uri":"a"},{"uri":"b,c]"},null,1,-2.5e3,"s",true,[],[[1],{}]]`,
		` [ 1 , "x" ] `, `[]`, `[ ]`, `{}`, `"[1]"`, `null`, `[null]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !json.Valid([]byte(s)) {
			return
		}
		got, ok := ArrayElements([]byte(s))
		var want []json.RawMessage
		werr := json.Unmarshal([]byte(s), &want)
		isArray := strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "[")
		if !ok {
			if isArray {
				t.Fatalf("%q: declined, encoding/json found %q", s, want)
			}
			return
		}
		if werr != nil || !isArray || len(got) != len(want) {
			t.Fatalf("%q: got %q, encoding/json %q (%v)", s, got, want, werr)
		}
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("%q: element %d = %q, encoding/json %q", s, i, got[i], want[i])
			}
		}
	})
}
