package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/testdata/testkit"
)

// Several instances behind a load balancer (README, "Several instances
// behind a load balancer"): two mcp-mux serve --http with one config, and
// haproxy in front of them running the README's own config. It needs
// haproxy (Debian's package); .ci/run installs it, and under CI (CI set)
// its absence fails the test instead of skipping it.

// TestLoadBalancedInstancesWithHAProxy: through haproxy, (a) sessions of
// the handshake era each stay on one instance, round robin puts them on
// both, and all of a session's requests work (calls, subscribe, the update
// on its event stream); (b) requests of the current era are spread over
// both instances and all succeed, and a subscriptions/listen stream gets
// its update; (c) without the stick rules, a handshake-era session breaks:
// the other instance does not know it.
func TestLoadBalancedInstancesWithHAProxy(t *testing.T) {
	bin := haproxyBin(t)
	const token = "lb-test-token"
	cfg := testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`, []string{"f", "-name", "f"})
	muxes := []*httpMux{
		startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token),
		startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token),
	}
	// Which instance answered a call: its fixture's pid (each instance runs
	// its own copy of the backend).
	direct := make([]*mcp.ClientSession, len(muxes))
	instanceOf := map[int]int{} // fixture pid -> index in muxes
	for i, m := range muxes {
		direct[i] = connectModern(t, m.url, token, nil)
		instanceOf[statsOf(t, direct[i]).PID] = i
	}
	if len(instanceOf) != len(muxes) {
		t.Fatalf("the instances' fixtures share a pid: %v", instanceOf)
	}
	answeredBy := func(t *testing.T, cs *mcp.ClientSession) int {
		t.Helper()
		pid := statsOf(t, cs).PID
		i, ok := instanceOf[pid]
		if !ok {
			t.Fatalf("a call was answered by a fixture of neither instance (pid %d)", pid)
		}
		return i
	}
	conf := readmeHAProxyConfig(t)

	t.Run("handshake era sticks to one instance", func(t *testing.T) {
		lb := startHAProxy(t, bin, conf, muxes)
		perInstance := make([]int, len(muxes))
		for n := range 4 {
			client := fmt.Sprintf("lb-handshake-%d", n) // how the instances' logs and lists name it
			updated := make(chan string, 16)
			c := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
			})
			tr := &mcp.StreamableClientTransport{Endpoint: lb.url, HTTPClient: &http.Client{Transport: withBearer{token}}}
			cs, err := c.Connect(testkit.CtxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
			if err != nil {
				t.Fatalf("session %d: connect: %v\n%s", n, err, lb)
			}
			t.Cleanup(func() { cs.Close() })
			if cs.ID() == "" {
				t.Fatal("no Mcp-Session-Id")
			}
			tools, err := cs.ListTools(testkit.CtxT(t), nil)
			if err != nil || !hasTool(tools, "f__echo") {
				t.Fatalf("session %d: tools/list: %v %v\n%s", n, err, tools, lb)
			}
			at := answeredBy(t, cs)
			for k := range 5 {
				text := fmt.Sprintf("s%d-%d", n, k)
				res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": text}})
				if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, text) {
					t.Fatalf("session %d: echo %q: %v %+v\n%s", n, text, err, res, lb)
				}
				if i := answeredBy(t, cs); i != at {
					t.Fatalf("session %d moved from instance %d to %d", n, at, i)
				}
			}
			// Its subscription, and the update on its event stream (a
			// GET, stuck to the instance like the POSTs).
			uri := fmt.Sprintf("fixture://f/res/%d", n%2+1) // res/3 is the current era's, below
			if err := cs.Subscribe(testkit.CtxT(t), &mcp.SubscribeParams{URI: uri}); err != nil {
				t.Fatalf("session %d: subscribe: %v\n%s", n, err, lb)
			}
			if _, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__update", Arguments: map[string]any{"uri": uri}}); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-updated:
				if got != uri {
					t.Fatalf("session %d: update for %s, want %s", n, got, uri)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("session %d: no update for %s\n%s", n, uri, lb)
			}
			// The instance that answered lists it among its sessions, and
			// only that one logged its start.
			if !slices.Contains(clientsListed(t, cs), client+" 1") {
				t.Fatalf("session %d: mcp-mux://backends does not list it", n)
			}
			started := regexp.MustCompile(`session started session=\S+ client="` + client + ` 1"`)
			for i, m := range muxes {
				if got := started.MatchString(m.stderr.String()); got != (i == at) {
					t.Fatalf("session %d answered by instance %d, but instance %d logged its start: %v", n, at, i, got)
				}
			}
			perInstance[at]++
		}
		for i, n := range perInstance {
			if n == 0 {
				t.Fatalf("round robin put no session on instance %d: %v", i, perInstance)
			}
		}
	})

	t.Run("current era needs no affinity", func(t *testing.T) {
		lb := startHAProxy(t, bin, conf, muxes)
		updated := make(chan string, 16)
		cs := connectModern(t, lb.url, token, func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		})
		perInstance := make([]int, len(muxes))
		tools, err := cs.ListTools(testkit.CtxT(t), nil)
		if err != nil || !hasTool(tools, "f__echo") {
			t.Fatalf("tools/list: %v %v\n%s", err, tools, lb)
		}
		for k := range 8 {
			text := fmt.Sprintf("m%d", k)
			res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": text}})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, text) {
				t.Fatalf("echo %q: %v %+v\n%s", text, err, res, lb)
			}
		}
		// Only stats calls now: round robin alternating with another
		// request would send every stats call to the same instance.
		for range 8 {
			perInstance[answeredBy(t, cs)]++
		}
		for i, n := range perInstance {
			if n == 0 {
				t.Fatalf("no request reached instance %d: %v", i, perInstance)
			}
		}

		// A subscriptions/listen stream stays with the instance it went to:
		// an update from that instance's backend arrives on it. (No other
		// session holds this URI: the instance's backend is subscribed by
		// this stream alone.)
		const uri = "fixture://f/res/3"
		listening := make(chan error, 1)
		lctx, stop := context.WithCancel(context.Background())
		defer stop()
		go func() { listening <- cs.Subscribe(lctx, &mcp.SubscribeParams{URI: uri}) }()
		holder := -1
		testkit.Eventually(t, 5*time.Second, "one instance's backend is subscribed through the listen stream", func() bool {
			for i, d := range direct {
				if statsOf(t, d).Subscribe[uri] > 0 {
					holder = i
					return true
				}
			}
			return false
		})
		if _, err := direct[holder].CallTool(context.Background(), &mcp.CallToolParams{Name: "f__update", Arguments: map[string]any{"uri": uri}}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-updated:
			if got != uri {
				t.Fatalf("update for %s, want %s", got, uri)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no update on the listen stream\n%s", lb)
		}
		if err := cs.Unsubscribe(context.Background(), &mcp.UnsubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-listening:
		case <-time.After(5 * time.Second):
			t.Fatal("Subscribe did not return after Unsubscribe")
		}
	})

	// The control: the same config without its stick rules. Round robin
	// sends a session's second request to the instance that did not answer
	// its initialize.
	t.Run("without the stick rules a session breaks", func(t *testing.T) {
		var kept []string
		for _, line := range strings.Split(conf, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "stick") {
				kept = append(kept, line)
			}
		}
		unstuck := strings.Join(kept, "\n")
		if unstuck == conf {
			t.Fatal("the README's haproxy config has no stick rules")
		}
		lb := startHAProxy(t, bin, unstuck, muxes)
		err := handshakeSession(lb.url, token)
		if err == nil {
			t.Fatalf("a handshake-era session worked without affinity: the test would not catch a config that lost it\n%s", lb)
		}
		if !strings.Contains(err.Error(), "session not found") && !strings.Contains(err.Error(), "404") {
			t.Fatalf("the session failed, but not because the other instance did not know it: %v", err)
		}
		t.Logf("without affinity, as expected: %v", err)
	})
}

// handshakeSession opens a handshake-era session at url and uses it as
// the sticky subtest does; it returns the first error.
func handshakeSession(url, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "lb-unstuck", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withBearer{token}}, MaxRetries: -1}
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	for k := range 4 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": fmt.Sprint(k)}}); err != nil {
			return fmt.Errorf("tools/call: %w", err)
		}
	}
	return nil
}

// connectModern connects a client of the current era (2026-07-28) to url,
// closed when the test ends.
func connectModern(t *testing.T, url, token string, updated func(context.Context, *mcp.ResourceUpdatedNotificationRequest)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "lb-modern", Version: "1"}, &mcp.ClientOptions{ResourceUpdatedHandler: updated})
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: withBearer{token}}}
	cs, err := c.Connect(testkit.CtxT(t), tr, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v < "2026-07-28" {
		t.Fatalf("negotiated %s, want the current era", v)
	}
	return cs
}

type fixtureStatsResult struct {
	PID       int            `json:"pid"`
	Subscribe map[string]int `json:"subscribe"`
}

// statsOf calls the fixture's stats tool through cs.
func statsOf(t *testing.T, cs *mcp.ClientSession) fixtureStatsResult {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__stats"})
	if err != nil || res.IsError || len(res.Content) == 0 {
		t.Fatalf("f__stats: %v %+v", err, res)
	}
	var st fixtureStatsResult
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// clientsListed is the clients of the sessions mcp-mux://backends lists,
// read through cs.
func clientsListed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ReadResource(testkit.CtxT(t), &mcp.ReadResourceParams{URI: "mcp-mux://backends"})
	if err != nil || len(res.Contents) == 0 {
		t.Fatalf("read mcp-mux://backends: %v", err)
	}
	var doc struct {
		Sessions []struct {
			Client string `json:"client"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
		t.Fatal(err)
	}
	var clients []string
	for _, s := range doc.Sessions {
		clients = append(clients, s.Client)
	}
	return clients
}

func hasTool(res *mcp.ListToolsResult, name string) bool {
	if res == nil {
		return false
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			return true
		}
	}
	return false
}

// haproxyBin finds haproxy, or skips the test saying how to get it; under
// CI, which must run it, it fails instead.
func haproxyBin(t *testing.T) string {
	t.Helper()
	p, why := findHAProxy()
	if why == "" {
		return p
	}
	if os.Getenv("CI") != "" && runtime.GOOS != "windows" {
		t.Fatal(why + "; CI must run this test (.ci/run installs it)")
	}
	t.Skip("load balancer test skipped: " + why)
	return ""
}

// findHAProxy is haproxy's path, or why the load balancer test cannot run
// here.
func findHAProxy() (path, why string) {
	if runtime.GOOS == "windows" {
		// Under Wine, Linux's haproxy is found as Z:\usr\sbin\haproxy.
		return "", "it runs haproxy from Debian's packages, on Linux"
	}
	if p, err := exec.LookPath("haproxy"); err == nil {
		return p, ""
	}
	for _, p := range []string{"/usr/sbin/haproxy", "/usr/local/sbin/haproxy"} { // sbin is not on every PATH
		if _, err := os.Stat(p); err == nil {
			return p, ""
		}
	}
	return "", "haproxy is not installed (Debian: apt-get install haproxy)"
}

// readmeHAProxyConfig is the haproxy config the README gives, so that the
// test runs what users are told to run.
func readmeHAProxyConfig(t *testing.T) string {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n```haproxy\n(.*?)\n```\n").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```haproxy block")
	}
	return string(m[1])
}

// haproxy is haproxy running in the foreground, killed when the test ends.
type haproxy struct {
	url    string
	conf   string
	stderr *testkit.SyncBuffer
}

// String is what a failure shows of it: its config and its output.
func (h *haproxy) String() string {
	return fmt.Sprintf("haproxy config:\n%s\nhaproxy output:\n%s", h.conf, h.stderr)
}

var (
	bindRe   = regexp.MustCompile(`(?m)^(\s*bind\s+)\S+`)
	serverRe = regexp.MustCompile(`(?m)^(\s*server\s+\S+\s+)\S+`)
)

// startHAProxy runs haproxy with conf (the README's), its bind address
// made a free loopback port and its servers the instances, in order.
func startHAProxy(t *testing.T, bin, conf string, muxes []*httpMux) *haproxy {
	t.Helper()
	n := 0
	var bad error
	conf = serverRe.ReplaceAllStringFunc(conf, func(line string) string {
		if n >= len(muxes) {
			bad = errors.New("more servers than instances")
			return line
		}
		addr := strings.TrimSuffix(strings.TrimPrefix(muxes[n].url, "http://"), "/mcp")
		n++
		return serverRe.ReplaceAllString(line, "${1}"+addr)
	})
	if bad != nil || n != len(muxes) {
		t.Fatalf("the config has %d servers for %d instances:\n%s", n, len(muxes), conf)
	}
	// The port is free when asked, and taken by haproxy an instant later;
	// should something take it meanwhile, haproxy exits and is run again.
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		h := &haproxy{url: "http://" + addr + "/mcp", conf: bindRe.ReplaceAllString(conf, "${1}"+addr), stderr: &testkit.SyncBuffer{}}
		path := filepath.Join(t.TempDir(), "haproxy.cfg")
		if err := os.WriteFile(path, []byte(h.conf+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// -db: foreground, no daemon; no master process, no stats socket.
		cmd := exec.Command(bin, "-db", "-f", path)
		cmd.Stdout, cmd.Stderr = h.stderr, h.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		up := testkit.Poll(10*time.Second, func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			c, err := net.Dial("tcp", addr)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		select {
		case <-exited:
			if attempt < 2 && strings.Contains(h.stderr.String(), "cannot bind") {
				continue
			}
			t.Fatalf("haproxy exited: %s\n%s", cmd.ProcessState, h)
		default:
		}
		if !up {
			t.Fatalf("haproxy did not listen on %s within 10 s\n%s", addr, h)
		}
		return h
	}
}

// TestDrainedInstanceBehindHAProxy: through haproxy with the README's
// config (its /readyz check included), a handshake-era session's
// instance is sent SIGTERM: it drains and exits, and what the session
// sees is what the README says, with the go-sdk client: its next request
// reaches the other instance, which answers 404 for the session
// (ErrSessionMissing), and a new initialize there works.
func TestDrainedInstanceBehindHAProxy(t *testing.T) {
	bin := haproxyBin(t)
	const token = "lb-drain-token"
	cfg := testkit.WriteConfig(t, `http_token = "${MUX_TEST_TOKEN}"`, []string{"f", "-name", "f"})
	muxes := []*httpMux{
		startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token),
		startHTTPMux(t, cfg, "MUX_TEST_TOKEN="+token),
	}
	pids := map[int]int{} // fixture pid -> index in muxes
	for i, m := range muxes {
		pids[statsOf(t, connectModern(t, m.url, token, nil)).PID] = i
	}
	lb := startHAProxy(t, bin, readmeHAProxyConfig(t), muxes)
	connect := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "lb-drain", Version: "1"}, nil)
		tr := &mcp.StreamableClientTransport{Endpoint: lb.url, HTTPClient: &http.Client{Transport: withBearer{token}}}
		return c.Connect(testkit.CtxT(t), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	}
	cs, err := connect()
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, lb)
	}
	defer cs.Close()
	at := pids[statsOf(t, cs).PID]
	gone := muxes[at]

	// A call in flight keeps it draining long enough for haproxy's check
	// to see /readyz fail.
	slept := sleepInFlight(t, connectModern(t, gone.url, token, nil), 9000)
	exited := make(chan struct{})
	go func() { gone.cmd.Wait(); close(exited) }()
	gone.cmd.Process.Signal(syscall.SIGTERM)
	down := fmt.Sprintf("mcp_mux/mux%d is DOWN", at+1)
	testkit.Eventually(t, 12*time.Second, "haproxy's check to take the draining instance out", func() bool {
		return strings.Contains(lb.stderr.String(), down)
	})
	t.Logf("haproxy: %s", strings.TrimSpace(lb.stderr.String()))
	if !strings.Contains(lb.stderr.String(), "code: 503") || strings.Contains(lb.stderr.String(), fmt.Sprintf("mux%d is DOWN", 2-at)) {
		t.Fatalf("haproxy's check must see the draining instance's 503, and the other up\n%s", lb)
	}
	// While it drains, a new session goes to the other instance.
	during, err := connect()
	if err != nil {
		t.Fatalf("a new session while one instance drains: %v\n%s", err, lb)
	}
	defer during.Close()
	if i := pids[statsOf(t, during).PID]; i == at {
		t.Fatal("a new session went to the draining instance")
	}
	select {
	case err := <-slept:
		if err != nil {
			t.Errorf("the call in flight on the draining instance: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call in flight on the draining instance did not end")
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the instance did not exit after draining\n%s", gone.stderr)
	}
	_, err = cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__echo", Arguments: map[string]any{"text": "after"}})
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("the session of a drained instance: %v, want the other instance's 404 (ErrSessionMissing)\n%s", err, lb)
	}
	t.Logf("the session's next call, its instance gone: %v", err)
	again, err := connect()
	if err != nil {
		t.Fatalf("a new initialize after the 404: %v\n%s", err, lb)
	}
	defer again.Close()
	if i := pids[statsOf(t, again).PID]; i == at {
		t.Fatalf("the new session was answered by the instance that exited")
	}
	if !strings.Contains(gone.stderr.String(), "drained") {
		t.Errorf("the instance's log does not say it drained:\n%s", gone.stderr)
	}
}

// requestsOf is how many requests cs's fixture has had, this one included.
func requestsOf(t *testing.T, cs *mcp.ClientSession) int {
	t.Helper()
	res, err := cs.CallTool(testkit.CtxT(t), &mcp.CallToolParams{Name: "f__stats"})
	if err != nil || res.IsError {
		t.Fatalf("f__stats: %v %+v", err, res)
	}
	var st struct {
		Requests int `json:"requests"`
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &st); err != nil {
		t.Fatal(err)
	}
	return st.Requests
}
