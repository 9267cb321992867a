package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// getMetrics GETs url with token (none if "") and returns the status and,
// for a 200, the parsed Prometheus text.
func getMetrics(t *testing.T, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return resp.StatusCode, fams
}

// callsCounted is mcp_mux_requests_total of backend's tools/call that
// ended ok, or -1 if there is no such series.
func callsCounted(fams map[string]*dto.MetricFamily, backend string) float64 {
	for _, m := range fams["mcp_mux_requests_total"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["backend"] == backend && l["method"] == "tools/call" && l["outcome"] == "ok" {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// outsideAddr is an address of this machine that is not loopback, or ""
// if it has none.
func outsideAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			return ip.IP.String()
		}
	}
	return ""
}

var servingOnRe = regexp.MustCompile(`serving over HTTP url=http://\S+:(\d+)/mcp`)

// mcp-mux serving HTTP on 0.0.0.0 has its metrics behind the same token
// as its MCP endpoint: 401 without it, the counts with it.
func TestMetricsOnANonLoopbackAddressNeedTheToken(t *testing.T) {
	const token = "e2e-metrics-token-0123456789"
	cfg := testkit.WriteConfig(t, `http_token = "${MUX_E2E_TOKEN}"`, []string{"f", "-name", "f"})
	cmd := exec.Command(testkit.MuxBin(t), "serve", "--config", cfg, "--http", "0.0.0.0:0")
	stderr := &testkit.SyncBuffer{}
	cmd.Stderr = stderr
	cmd.Env = append(cmd.Environ(), "MUX_E2E_TOKEN="+token)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopProcess(cmd.Process)
		cmd.Wait()
	})
	var port string
	if !testkit.Poll(10*time.Second, func() bool {
		m := servingOnRe.FindStringSubmatch(stderr.String())
		if m != nil {
			port = m[1]
		}
		return m != nil
	}) {
		t.Fatalf("mcp-mux did not say where it listens; stderr:\n%s", stderr)
	}
	host := outsideAddr()
	if host == "" {
		host = "127.0.0.1" // no other interface: the same listener, reached on loopback
	}
	base := "http://" + net.JoinHostPort(host, port)

	for _, bad := range []string{"", "wrong-token"} {
		if code, _ := getMetrics(t, base+"/metrics", bad); code != http.StatusUnauthorized {
			t.Errorf("GET /metrics with token %q: %d, want 401", bad, code)
		}
	}
	hc := connectHTTP(t, base+"/mcp", token)
	callText(t, hc.cs, "f__echo", nil)
	code, fams := getMetrics(t, base+"/metrics", token)
	if code != http.StatusOK {
		t.Fatalf("GET /metrics with the token: %d, want 200", code)
	}
	if got := callsCounted(fams, "f"); got != 1 {
		t.Errorf("f's calls = %v, want 1", got)
	}
	if strings.Contains(stderr.String(), token) {
		t.Errorf("the token is in the log:\n%s", stderr)
	}
}

// A stdio mcp-mux serves its metrics on [mux] metrics_listen, and stops
// when it ends.
func TestMetricsListenOfAStdioMux(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	w := startWire(t, testkit.WriteConfig(t, fmt.Sprintf("metrics_listen = %q", addr), []string{"f", "-name", "f"}))
	w.initialize()
	w.toolText(2, "f__echo")
	w.toolText(3, "f__echo")
	url := "http://" + addr + "/metrics"
	code, fams := getMetrics(t, url, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\nstderr:\n%s", url, code, w.stderr)
	}
	if got := callsCounted(fams, "f"); got != 2 {
		t.Errorf("f's calls = %v, want 2", got)
	}
	w.stdin.Close()
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("mcp-mux did not exit on stdin EOF\nstderr:\n%s", w.stderr)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after mcp-mux ended", addr)
	}
}

// Two stdio mcp-mux of one config (two agents) with one metrics_listen:
// the first serves the metrics, the second serves its agent all the same
// and says in its log which process has the port and that it serves no
// metrics.
func TestASecondMuxOnTheSameMetricsListenServesItsAgent(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg := testkit.WriteConfig(t, fmt.Sprintf("metrics_listen = %q", addr), []string{"f", "-name", "f"})
	first := startWire(t, cfg)
	testkit.Eventually(t, 10*time.Second, "the first mcp-mux serving metrics", func() bool {
		return strings.Contains(first.stderr.String(), "serving metrics")
	})
	second := startWire(t, cfg)
	for _, w := range []*wire{first, second} {
		w.initialize()
		w.toolText(2, "f__echo")
	}
	want := fmt.Sprintf("metrics not served: %s is in use by mcp-mux pid %d", addr, first.cmd.Process.Pid)
	testkit.Eventually(t, 10*time.Second, "the second to say so", func() bool {
		return strings.Contains(second.stderr.String(), want)
	})
	if got := second.stderr.String(); !strings.Contains(got, "this mcp-mux serves its agent without metrics") {
		t.Errorf("the second's log does not say it serves no metrics:\n%s", got)
	}
	if code, fams := getMetrics(t, "http://"+addr+"/metrics", ""); code != http.StatusOK || callsCounted(fams, "f") != 1 {
		t.Errorf("the metrics at %s: %d, f's calls %v; want the first's one call", addr, code, callsCounted(fams, "f"))
	}

	// A port another program has is not blamed on an mcp-mux: the error says why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	other := startWire(t, testkit.WriteConfig(t, fmt.Sprintf("metrics_listen = %q", ln.Addr()), []string{"f", "-name", "f"}))
	other.initialize()
	testkit.Eventually(t, 10*time.Second, "a mux to say it cannot listen there", func() bool {
		return strings.Contains(other.stderr.String(), "metrics not served: cannot listen on "+ln.Addr().String()+"; this mcp-mux serves its agent without metrics")
	})
	if strings.Contains(other.stderr.String(), "in use by mcp-mux") {
		t.Errorf("another program's port is blamed on an mcp-mux:\n%s", other.stderr)
	}
}
