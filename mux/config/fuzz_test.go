package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, and that failures are
// always a *Error with sensible problems.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(configDir, "*.toml"))
	files = append(files, "../../mcp-mux.toml.example")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("[[backend]]\nname = \"a\"\ncommand = \"go\"\nenv = { A = \"${X:-y}$$${\" }\n"))
	f.Add([]byte("a = \"\"\"\n\\\"\"\"\nb = '''x''''\n[[ \"q.k\" . 'l' ]]\n"))
	env := func(k string) (string, bool) {
		if k == "SET" {
			return "v", true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		scanKeyLines(data) // must not panic on any input, even invalid TOML
		cfg, err := Parse("fuzz.toml", data, env)
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without error")
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("error %T %v is not a *Error with problems", err, err)
		}
		nlines := bytes.Count(data, []byte("\n")) + 1
		for _, p := range ce.Problems {
			if p.Line < 0 || p.Line > nlines {
				t.Errorf("problem line %d outside the file (%d lines): %s", p.Line, nlines, p)
			}
			if p.Message == "" || p.File != "fuzz.toml" {
				t.Errorf("bad problem %+v", p)
			}
			if strings.Contains(p.Message, "goroutine ") {
				t.Errorf("stack trace in message: %s", p)
			}
		}
	})
}
