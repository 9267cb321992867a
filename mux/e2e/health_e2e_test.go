package e2e

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// The health endpoints (README, "Several instances behind a load
// balancer"): /healthz says the process serves, /readyz that every
// backend's catalog is known (running and listed, remembered, or failed)
// and the instance is not draining. Both are outside http_token, behind
// the same Origin and Host checks as /mcp.

// probe GETs url with the headers given as name, value pairs; it reports
// the status and the body.
func probe(t *testing.T, url string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if strings.EqualFold(headers[i], "Host") {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHealthProbesOverHTTP: /healthz answers at once; /readyz is 503
// while a backend is still starting and 200 once its catalog is known,
// with a backend that failed counted as known; neither needs the token;
// a foreign Origin or Host is refused. A second instance, which finds
// the slow backend's catalog remembered, is ready without starting it.
func TestHealthProbesOverHTTP(t *testing.T) {
	const token = "probe-secret-token"
	cfg := testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`,
		[]string{"f", "-name", "f"},
		[]string{"slow", "-name", "slow", "-start-delay", "1500ms"},
		[]string{"broken", "-fail-start"})
	catalogs := "MCP_MUX_CATALOGS=" + filepath.Join(t.TempDir(), "catalogs")
	m := startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token, catalogs)
	base := strings.TrimSuffix(m.url, "/mcp")

	if code, body := probe(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz while starting: %d %q, want 200 ok\nstderr:\n%s", code, body, m.stderr)
	}
	code, body := probe(t, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz with a backend still starting: %d %q, want 503 saying a backend is starting", code, body)
	}
	if strings.Count(strings.TrimSpace(body), "\n") != 0 || strings.Contains(body, token) || strings.Contains(body, "slow") {
		t.Errorf("/readyz's reason is one line naming no backend and no secret: %q", body)
	}
	t.Logf("not ready yet: %d %q", code, body)
	testkit.Eventually(t, 15*time.Second, "/readyz to answer 200 once the slow backend listed", func() bool {
		code, body = probe(t, base+"/readyz")
		return code == http.StatusOK
	})
	if strings.TrimSpace(body) != "ok" {
		t.Errorf("/readyz when ready: %q, want ok", body)
	}
	// The same checks as /mcp of who asks, but the token.
	for _, h := range [][]string{
		{"Origin", "http://evil.example"},
		{"Host", "evil.example"},
	} {
		for _, path := range []string{"/healthz", "/readyz"} {
			if code, body := probe(t, base+path, h...); code != http.StatusForbidden {
				t.Errorf("%s with %s: %s: %d %q, want 403", path, h[0], h[1], code, body)
			}
		}
	}
	if code, _ := probe(t, base+"/readyz", "Origin", base); code != http.StatusOK {
		t.Errorf("/readyz with the server's own Origin: %d, want 200", code)
	}
	if code, _ := probe(t, m.url); code != http.StatusUnauthorized {
		t.Errorf("/mcp without the token: %d, want 401 (the probes' exemption is theirs only)", code)
	}

	// Remembered: the next instance lists slow from memory, not starting
	// it, and is ready without it.
	m2 := startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token, catalogs)
	base2 := strings.TrimSuffix(m2.url, "/mcp")
	testkit.Eventually(t, 10*time.Second, "/readyz of an instance whose backends are remembered to answer 200", func() bool {
		code, _ := probe(t, base2+"/readyz")
		return code == http.StatusOK
	})
	if strings.Contains(m2.stderr.String(), "slow: started") {
		t.Errorf("the second instance started slow, whose catalog it remembers:\n%s", m2.stderr)
	}
}

// TestHealthProbesOnMetricsListen: a stdio mcp-mux's metrics_listen
// serves /healthz and /readyz too.
func TestHealthProbesOnMetricsListen(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	w := startWire(t, testkit.WriteConfig(t, fmt.Sprintf("metrics_listen = %q", addr), []string{"f", "-name", "f"}))
	w.initialize()
	base := "http://" + addr
	testkit.Eventually(t, 10*time.Second, "/readyz on metrics_listen to answer 200", func() bool {
		code, _ := probe(t, base+"/readyz")
		return code == http.StatusOK
	})
	if code, body := probe(t, base+"/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz on metrics_listen: %d %q", code, body)
	}
	if code, _ := probe(t, base+"/readyz", "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("/readyz on metrics_listen with a foreign Origin: %d, want 403", code)
	}
}
