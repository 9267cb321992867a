package mux

import (
	"bytes"
	"strings"
	"testing"

	"github.com/charmbracelet/log"
)

// TestSDKInfoIsLoggedAtDebug: the go-sdk's routine INFO lines show only at
// debug; its warnings and errors show at info.
func TestSDKInfoIsLoggedAtDebug(t *testing.T) {
	var buf bytes.Buffer
	logger := log.New(&buf)
	logger.SetLevel(log.InfoLevel)
	sdk := sdkLogger(logger).With("session_id", "s1")
	sdk.Info("server session connected")
	sdk.Warn("bad notification")
	sdk.Error("write failed")
	got := buf.String()
	if strings.Contains(got, "connected") || !strings.Contains(got, "WARN go-sdk: bad notification session_id=s1") || !strings.Contains(got, "ERRO go-sdk: write failed") {
		t.Errorf("at info:\n%s", got)
	}

	buf.Reset()
	logger.SetLevel(log.DebugLevel)
	sdkLogger(logger).Info("server session connected", "session_id", "s1")
	if got := buf.String(); !strings.Contains(got, "DEBU go-sdk: server session connected session_id=s1") {
		t.Errorf("at debug:\n%s", got)
	}
}
