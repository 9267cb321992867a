package mux

import (
	"context"
	"log/slog"

	"github.com/charmbracelet/log"
)

// sdkLogger is the logger given to the go-sdk. Its INFO lines are routine
// (every session connecting, initialized, disconnecting, every subscribe),
// so they are logged at DEBUG: at info, a session logs what mcp-mux itself
// has to say. Its warnings and errors stay what they are.
func sdkLogger(logger *log.Logger) *slog.Logger {
	return slog.New(demoteInfo{logger.WithPrefix("go-sdk")})
}

// demoteInfo logs records below WARN at DEBUG.
type demoteInfo struct{ h slog.Handler }

func demote(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return min(l, slog.LevelDebug)
	}
	return l
}

func (d demoteInfo) Enabled(ctx context.Context, l slog.Level) bool {
	return d.h.Enabled(ctx, demote(l))
}

func (d demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return d.h.Handle(ctx, r)
}

func (d demoteInfo) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteInfo{d.h.WithAttrs(attrs)}
}

func (d demoteInfo) WithGroup(name string) slog.Handler {
	return demoteInfo{d.h.WithGroup(name)}
}
