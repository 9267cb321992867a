package mux

import (
	"context"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The cost of the mux is measured against a direct connection to the same
// fixture backend, in the same run: compare the two ns/op (benchstat, or
// the ratio printed by BenchmarkToolCall).

func directSession(b *testing.B, version string) *mcp.ClientSession {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(),
		&mcp.CommandTransport{Command: exec.Command(testkit.FixtureBin(b), "-name", "notes")}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func BenchmarkToolCall(b *testing.B) {
	args := map[string]any{"hello": "world"}
	run := func(b *testing.B, cs *mcp.ClientSession, name string) time.Duration {
		ctx := context.Background()
		cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}) // warm up
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	// Both eras: "" is the current one (server/discover, then the version
	// in every request's _meta).
	for _, version := range []string{"2025-11-25", ""} {
		era := "handshake era"
		if version == "" {
			era = "current era"
		}
		var direct, muxed time.Duration
		b.Run("direct, "+era, func(b *testing.B) { direct = run(b, directSession(b, version), "echo") })
		b.Run("mux, "+era, func(b *testing.B) {
			m := startMux(b, fixture(b, "notes"))
			cs := connectAt(b, m, nil, version)
			toolNames(b, cs) // as agents do: calls pass through as bytes from then on
			muxed = run(b, cs, "notes__echo")
		})
		if direct > 0 {
			b.Logf("tools/call through the mux, %s: %.2f× a direct connection (%v vs %v per call)", era, float64(muxed)/float64(direct), muxed, direct)
		}
	}
}

// BenchmarkConcurrentStart: ten backends that each take 200 ms to start,
// from mux start to a complete first tools/list.
func BenchmarkConcurrentStart(b *testing.B) {
	for i := 0; i < b.N; i++ {
		var specs []config.Backend
		for j := range 10 {
			specs = append(specs, fixture(b, fmt.Sprintf("slow%d", j), "-start-delay", "200ms"))
		}
		m := New(testConfig(specs...), testLogger(b), "bench")
		m.Start()
		st, ct := mcp.NewInMemoryTransports()
		m.Connect(context.Background(), st)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(context.Background(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cs.Close()
		m.Close()
		b.StartTimer()
	}
}
