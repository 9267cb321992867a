package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// exporter sends spans to an OTLP/HTTP collector: an
// ExportTraceServiceRequest in protobuf (encodeTraces) POSTed to its
// traces URL, gzipped if asked. It is configured by the OTLP exporter's
// standard variables (exporterConfigFromEnv); "http/protobuf" is the only
// protocol it speaks.
type exporter struct {
	url      string // where requests go, as configured
	redacted string // url for errors and logs: without a password
	header   http.Header
	gzip     bool
	timeout  time.Duration // an export with its retries
	client   *http.Client

	// report is told of an export's first failed attempt that is
	// retried, once until an export succeeds: a collector that is down is
	// known when first found out, not only when the export gives up
	// (the tracer's error hook, which is told of the export's error too).
	report    func(error)
	reporting atomic.Bool // a failure was reported and nothing succeeded since

	stop     context.Context // done once Shutdown is called
	shutdown context.CancelFunc
}

// Backoff between the attempts of an export (doubling, with jitter),
// unless the collector says when to come back (Retry-After); never past
// the export's deadline.
const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// maxResponse is what is read of a collector's answer.
const maxResponse = 64 << 10

// errShutdown is Export's error once the exporter is shut down.
var errShutdown = errors.New("the trace exporter is shut down")

// exporterConfig is the exporter's configuration, from the environment.
type exporterConfig struct {
	URL     *url.URL
	Header  http.Header
	Gzip    bool
	Timeout time.Duration
	TLS     *tls.Config // nil: the system's roots, no client certificate
}

// otlpVar is the value of the OTLP exporter variable OTEL_EXPORTER_OTLP_TRACES_<name>,
// or else of OTEL_EXPORTER_OTLP_<name>, and which of the two it is.
func otlpVar(getenv func(string) string, name string) (value, from string) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			return v, k
		}
	}
	return "", ""
}

// endpointError says why raw, the value of the variable from, is not an
// endpoint to export to. A host:port without a scheme (what a collector's
// docs often print) gets the URL to write instead. The value is shown only
// where it cannot hold a password: url's own error would show it, and an
// opaque URL ("user:pass@host:4318" reads as the scheme "user") keeps it.
func endpointError(from, raw string, u *url.URL, err error) error {
	const want = "want an http:// or https:// URL, e.g. http://127.0.0.1:4318"
	if host, _, splitErr := net.SplitHostPort(raw); splitErr == nil && host != "" && !strings.ContainsAny(raw, "@/") {
		return fmt.Errorf("%s is %s, which has no scheme: write http://%s (or https:// if the collector serves TLS)", from, raw, raw)
	}
	if err != nil || u.Opaque != "" {
		return fmt.Errorf("%s is not a URL: %s", from, want)
	}
	return fmt.Errorf("%s is %s: %s", from, u.Redacted(), want)
}

// exporterConfigFromEnv reads the variables of the OpenTelemetry
// specification's "OTLP Exporter Configuration", each OTEL_EXPORTER_OTLP_*
// one overridden by its OTEL_EXPORTER_OTLP_TRACES_* form:
//
//   - ENDPOINT, a base URL the traces path (/v1/traces) is appended to;
//     TRACES_ENDPOINT is the traces URL as it is;
//   - PROTOCOL: http/protobuf only. grpc and http/json are an error (the
//     collector would not read what is sent it), as is anything else;
//   - HEADERS: key=value pairs separated by commas, values URL-encoded;
//   - TIMEOUT in milliseconds: an export with its retries (default
//     exportTimeout, not the specification's 10 s);
//   - COMPRESSION: gzip, or none;
//   - CERTIFICATE: the PEM file of the roots to verify the collector with;
//     CLIENT_CERTIFICATE and CLIENT_KEY: mcp-mux's certificate and key.
//
// INSECURE is for gRPC only; here the URL's scheme says. warn is told of
// what is ignored (never a header's value).
func exporterConfigFromEnv(getenv func(string) string, warn func(msg string, kv ...any)) (*exporterConfig, error) {
	if p, from := otlpVar(getenv, "PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("%s is %q: mcp-mux exports traces over OTLP/HTTP with protobuf (http/protobuf) only", from, p)
	}
	cfg := &exporterConfig{Header: http.Header{}, Timeout: exportTimeout}

	raw, from := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	if raw == "" {
		raw, from = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")), "OTEL_EXPORTER_OTLP_ENDPOINT"
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, endpointError(from, raw, u, err)
	}
	if from == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		u.Path = path.Join("/", u.Path, "v1/traces")
		u.RawPath = ""
	} else if u.Path == "" {
		u.Path = "/"
	}
	cfg.URL = u

	if h, from := otlpVar(getenv, "HEADERS"); h != "" {
		// A bad entry is named by its place only: it may be a token.
		for i, pair := range strings.Split(h, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || !validHeaderKey(k) {
				warn("ignoring an entry of "+from+" that is not name=value", "entry", i+1)
				continue
			}
			val, err := url.PathUnescape(v)
			if err != nil {
				warn("ignoring a header of "+from+" whose value is not URL-encoded", "entry", i+1, "name", k)
				continue
			}
			cfg.Header.Set(k, strings.TrimSpace(val))
		}
	}

	if t, from := otlpVar(getenv, "TIMEOUT"); t != "" {
		if ms, err := strconv.Atoi(t); err == nil && ms > 0 {
			cfg.Timeout = time.Duration(ms) * time.Millisecond
		} else {
			warn(from+" is not a number of milliseconds: using the default", "value", t, "default", exportTimeout)
		}
	}

	switch c, from := otlpVar(getenv, "COMPRESSION"); strings.ToLower(c) {
	case "gzip":
		cfg.Gzip = true
	case "", "none":
	default:
		warn(from+" is neither gzip nor none: not compressing", "value", c)
	}

	tlsCfg, err := tlsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	cfg.TLS = tlsCfg
	return cfg, nil
}

// tlsFromEnv is the TLS configuration of CERTIFICATE, CLIENT_CERTIFICATE
// and CLIENT_KEY, or nil if none is set.
func tlsFromEnv(getenv func(string) string) (*tls.Config, error) {
	ca, caFrom := otlpVar(getenv, "CERTIFICATE")
	cert, certFrom := otlpVar(getenv, "CLIENT_CERTIFICATE")
	key, keyFrom := otlpVar(getenv, "CLIENT_KEY")
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caFrom, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", caFrom, ca)
		}
	}
	switch {
	case cert != "" && key != "":
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certFrom, keyFrom, err)
		}
		c.Certificates = []tls.Certificate{pair}
	case cert != "":
		return nil, fmt.Errorf("%s is set without OTEL_EXPORTER_OTLP_CLIENT_KEY", certFrom)
	case key != "":
		return nil, fmt.Errorf("%s is set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", keyFrom)
	}
	return c, nil
}

// validHeaderKey reports whether k is an HTTP header name (a token).
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// newExporter is the exporter of cfg; version is mcp-mux's, for its
// User-Agent. It makes no connection.
func newExporter(cfg *exporterConfig, version string, report func(error)) *exporter {
	tr := http.DefaultTransport.(*http.Transport).Clone() // proxies from the environment
	if cfg.TLS != nil {
		tr.TLSClientConfig = cfg.TLS
	}
	h := cfg.Header.Clone()
	h.Set("Content-Type", "application/x-protobuf")
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", "mcp-mux/"+version)
	}
	if cfg.Gzip {
		h.Set("Content-Encoding", "gzip")
	}
	stop, shutdown := context.WithCancel(context.Background())
	return &exporter{
		url:      cfg.URL.String(),
		redacted: cfg.URL.Redacted(),
		header:   h,
		gzip:     cfg.Gzip,
		timeout:  cfg.Timeout,
		client:   &http.Client{Transport: tr},
		report:   report,
		stop:     stop,
		shutdown: shutdown,
	}
}

// Export sends body, an ExportTraceServiceRequest, retrying (within the
// export's timeout) when the collector cannot be reached or says to (429,
// 502, 503, 504). Any other answer but a 2xx fails the batch.
func (e *exporter) Export(ctx context.Context, body []byte) error {
	if e.stop.Err() != nil {
		return errShutdown
	}
	if e.gzip {
		var buf bytes.Buffer
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(&buf)
		zw.Write(body) // a bytes.Buffer takes it all
		zw.Close()
		gzipWriters.Put(zw)
		body = buf.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	defer context.AfterFunc(e.stop, cancel)() // Shutdown ends an export in flight

	backoff := firstBackoff
	for attempt := 1; ; attempt++ {
		retry, wait, err := e.send(ctx, body)
		if err == nil {
			e.reporting.Store(false)
			return nil
		}
		if !retry {
			return err
		}
		if e.stop.Err() != nil {
			return fmt.Errorf("%w (%w)", err, errShutdown)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%s: the export's %v are up)", err, attempts(attempt), e.timeout)
		}
		if e.report != nil && e.reporting.CompareAndSwap(false, true) {
			e.report(fmt.Errorf("%w (retrying)", err))
		}
		if wait <= 0 {
			wait = backoff/2 + rand.N(backoff) // 0.5 to 1.5 times
			backoff = min(2*backoff, maxBackoff)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("%w (%s: the next would be past the export's deadline)", err, attempts(attempt))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if e.stop.Err() != nil {
				return fmt.Errorf("%w (%w)", err, errShutdown)
			}
			return fmt.Errorf("%w (%s: the export's %v are up)", err, attempts(attempt), e.timeout)
		}
	}
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// send makes one attempt: its error, whether to try again, and when the
// collector said to (Retry-After), if it did.
func (e *exporter) send(ctx context.Context, body []byte) (retry bool, wait time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, 0, fmt.Errorf("exporting spans to %s: %w", e.redacted, unwrapURLError(err))
	}
	req.Header = e.header.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		// Refused, reset, timed out: the collector may be back soon.
		return true, 0, fmt.Errorf("exporting spans to %s: %w", e.redacted, unwrapURLError(err))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse)) // so that the connection is reused
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-protobuf") {
			if n, msg, ok := decodePartialSuccess(answer); ok && (n != 0 || msg != "") {
				return false, 0, fmt.Errorf("the collector at %s rejected %d spans: %s", e.redacted, n, msg)
			}
		}
		return false, 0, nil
	}
	err = fmt.Errorf("exporting spans to %s: %s%s", e.redacted, resp.Status, bodyText(resp.Header, answer))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, retryAfter(resp.Header.Get("Retry-After")), err
	}
	return false, 0, err
}

// unwrapURLError is err without the *url.Error around it, which names
// the URL: the errors above name it, redacted.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// bodyText is what a collector's error answer says, if it is text (a
// google.rpc.Status in protobuf is not shown).
func bodyText(h http.Header, body []byte) string {
	ct := h.Get("Content-Type")
	if len(body) == 0 || !(strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "application/json")) {
		return ""
	}
	s := strings.TrimSpace(validUTF8(string(body)))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return ": " + s
}

// retryAfter is the wait a Retry-After header asks for: seconds or an
// HTTP date; 0 if none.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(min(s, int64(time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// Shutdown ends any export in flight and refuses those after it.
func (e *exporter) Shutdown() {
	e.shutdown()
	e.client.CloseIdleConnections()
}
