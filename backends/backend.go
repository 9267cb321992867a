// Package backends runs the MCP servers mcp-mux multiplexes: it starts each
// one as a child process, initializes an MCP client session with it, captures
// its stderr into the log, and stops it (with its whole process group); or,
// for a remote one, connects to it over HTTP (see remote.go).
package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/backends/wire"
)

// ProtocolVersion is pinned on connect: without it the go-sdk first sends a
// server/discover probe that makes some real stdio servers exit or hang.
const ProtocolVersion = "2025-11-25"

// ProtocolAuto is Spec.Protocol for a backend that is probed for the
// current protocol era (server/discover) instead of pinned.
const ProtocolAuto = "auto"

// Hooks receive what a backend sends on its own initiative. They are called
// from the go-sdk's notification dispatch (ResourceUpdated of a stdio backend
// from the reader of its stdout, in order with the rest), one at a time per
// backend, so they must not block: hand the work to another goroutine.
type Hooks struct {
	ToolsChanged     func()
	PromptsChanged   func()
	ResourcesChanged func()
	ResourceUpdated  func(*mcp.ResourceUpdatedNotificationParams)
	Progress         func(*mcp.ProgressNotificationParams)
	// Log is notifications/message; without it the message goes to the
	// backend's debug log.
	Log func(*mcp.LoggingMessageParams)
	// ElicitationComplete is notifications/elicitation/complete; like the
	// hooks above it must not block.
	ElicitationComplete func(*mcp.ElicitationCompleteParams)

	// Requests the backend sends its client, answered by whoever mcp-mux
	// forwards them to. They run on the go-sdk's request goroutines and may
	// block until the answer comes (a human answering an elicitation); ctx
	// ends when the backend cancels or goes away. A nil hook leaves the
	// request to the go-sdk's default answer.
	Roots         func(context.Context, *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
	CreateMessage func(context.Context, *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error)
	Elicit        func(context.Context, *mcp.ElicitParams) (*mcp.ElicitResult, error)

	// Agents says how many of the client's agent sessions have requests
	// in flight to the backend, and how many are connected: of a backend
	// that several clients share (Pool), sampling and elicitation go to
	// the client whose agent could have been meant, never to a guess.
	Agents func() (inFlight, connected int)
}

// Options configure how a backend is started and stopped.
type Options struct {
	Logger         *log.Logger   // required; the backend's lines are prefixed with its name
	StartupTimeout time.Duration // start + initialize; 0 means 30s
	// MaxMessageSize bounds one JSON-RPC line from the backend; a longer line
	// is reported and dropped (its request, if its id can be found, gets an
	// error at once), the connection stays up. 0 means 16 MiB.
	MaxMessageSize int
	ClientInfo     *mcp.Implementation
	Hooks          Hooks
	// ClientCapabilities says what to declare in initialize; of what it
	// returns only roots, sampling and elicitation are declared (the hooks
	// answer those requests). It is called once the process runs, so it may
	// wait (bounded by ctx) for the capabilities to be known while the
	// process boots. Nil, or a nil result, declares none.
	ClientCapabilities func(context.Context) *mcp.ClientCapabilities
}

// Backend is one running backend: its process and the MCP session with it.
type Backend struct {
	Spec Spec

	// of and view are set for a view of a pooled backend (Pool): of is the
	// running one, whose fields the methods use.
	of   *Backend
	view *view

	log     *log.Logger
	proc    *proc
	stdin   *os.File
	stdout  *os.File
	conn    *childConn
	session *mcp.ClientSession
	remote  *remote // set for a remote backend (Spec.URL), which has no process
	init    *mcp.InitializeResult
	caps    *mcp.ClientCapabilities // what was declared in initialize
	// sendRaw is the go-sdk's sending chain: the only way to send the
	// backend a notification the SDK has no call for.
	sendRaw mcp.MethodHandler

	exited   chan struct{} // closed when proc.wait has returned
	exitErr  error         // proc.wait's error; read after exited is closed
	done     chan struct{} // closed when the backend is fully down (process reaped, session closed)
	downErr  error         // why it went down; read after done is closed
	stopOnce sync.Once
	stopping chan struct{} // closed when Stop was called: the exit is expected
	grace    time.Duration // Stop's; set before stopping is closed

	// stderrR is the read end of its stderr; stderrDone is closed when
	// the goroutine reading it has returned (see endStderr).
	stderrR    *os.File
	stderrDone chan struct{}

	mu         sync.Mutex
	stderr     []string // the last stderr lines, for crash reports
	killReason error    // why Kill was called, if it was
}

const stderrKeep = 10

// Start runs spec's command (directly, never through a shell) in its own
// process group and initializes an MCP session with it, within
// opts.StartupTimeout. On failure nothing is left running.
func Start(ctx context.Context, spec Spec, opts Options) (*Backend, error) {
	if opts.StartupTimeout <= 0 {
		opts.StartupTimeout = 30 * time.Second
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = mcp.DefaultMaxLineLength
	}
	if opts.ClientInfo == nil {
		opts.ClientInfo = &mcp.Implementation{Name: "mcp-mux", Version: "dev"}
	}
	b := &Backend{
		Spec:     spec,
		log:      opts.Logger.WithPrefix(spec.Name),
		exited:   make(chan struct{}),
		done:     make(chan struct{}),
		stopping: make(chan struct{}),
	}
	if spec.URL != "" {
		return startRemote(ctx, b, opts)
	}
	if err := b.startProcess(); err != nil {
		return nil, err
	}

	var want *mcp.ClientCapabilities
	if opts.ClientCapabilities != nil {
		want = opts.ClientCapabilities(ctx)
	}
	b.caps = declared(want)
	conn := newChildConn(spec.Name, b.log, wire.PipeIO(b.stdout), wire.PipeIO(b.stdin), opts.MaxMessageSize)
	conn.updated = opts.Hooks.ResourceUpdated
	b.conn = conn
	client := b.newClient(opts)
	// Our own transport: no line the backend prints can end the connection
	// (see childConn).
	transport := childTransport{conn}
	cctx, cancel := context.WithTimeout(ctx, opts.StartupTimeout)
	defer cancel()
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cs, err := client.Connect(cctx, transport, sessionOptions(spec))
		ch <- result{cs, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-b.exited:
		// The process died before answering: report its exit, not a timeout.
		b.kill()
		b.stdout.Close()
		r = <-ch
		if r.err == nil {
			r.cs.Close()
		}
		if errors.Is(cctx.Err(), context.DeadlineExceeded) {
			// Unless the timeout came first: the go-sdk then closed its
			// stdin, and a backend that exits on EOF exited of that,
			// which can be seen before Connect returns (under Wine it
			// was: "exited during initialize: exit status 0").
			return nil, fmt.Errorf("did not initialize within %s%s%s", opts.StartupTimeout, b.noiseNote(), b.stderrTail())
		}
		return nil, fmt.Errorf("exited during initialize: %s%s%s", exitReason(b.exitErr), b.noiseNote(), b.stderrTail())
	}
	if r.err != nil {
		// A process that timed out was sent EOF on stdin by the go-sdk, and
		// may have exited of it: that exit explains nothing.
		timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded)
		if !timedOut {
			// A process that died closed stdout before it was reaped: its
			// exit status explains the failure better than the EOF does.
			select {
			case <-b.exited:
				b.kill()
				b.stdout.Close()
				return nil, fmt.Errorf("exited during initialize: %s%s%s", exitReason(b.exitErr), b.noiseNote(), b.stderrTail())
			case <-time.After(200 * time.Millisecond):
			}
		}
		b.kill()
		b.stdout.Close()
		if timedOut {
			return nil, fmt.Errorf("did not initialize within %s%s%s", opts.StartupTimeout, b.noiseNote(), b.stderrTail())
		}
		return nil, fmt.Errorf("initialize: %w%s%s", r.err, b.noiseNote(), b.stderrTail())
	}
	b.session = r.cs
	b.init = r.cs.InitializeResult()
	go b.monitor()
	return b, nil
}

// newClient is the go-sdk client a backend's session is made with: its
// hooks, the requests it answers, and b.conn's count of what was handled.
func (b *Backend) newClient(opts Options) *mcp.Client {
	client := mcp.NewClient(opts.ClientInfo, b.clientOptions(opts.Hooks))
	client.AddReceivingMiddleware(clientRequests(opts.Hooks, b.rootsAnswered), b.conn.handled)
	client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		b.sendRaw = next
		return next
	})
	return client
}

// sessionOptions pins the protocol version, unless spec asks for the probe.
func sessionOptions(spec Spec) *mcp.ClientSessionOptions {
	opts := &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion}
	if spec.Protocol == ProtocolAuto {
		opts.ProtocolVersion = "" // the go-sdk probes server/discover
	}
	return opts
}

func (b *Backend) startProcess() error {
	environ := b.Spec.Environ
	if environ == nil {
		environ = os.Environ()
	}
	cmd := exec.Command(b.Spec.Command, b.Spec.Args...)
	if b.Spec.Environ != nil && isBareName(b.Spec.Command) {
		// exec.Command looked it up on mux's PATH: the one that counts
		// is the environ's (a session's).
		cmd.Path, cmd.Err = CommandPath(b.Spec, b.Spec.Environ)
	}
	cmd.Dir = b.Spec.Cwd
	cmd.Env = ChildEnv(b.Spec, environ)

	// Plain os.Pipes rather than cmd.StdoutPipe: cmd.Wait must not wait for
	// our readers, which a grandchild holding stdout open would block forever.
	inR, inW, err := os.Pipe()
	if err != nil {
		return err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	p, err := startProc(cmd)
	if err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return fmt.Errorf("starting %q: %w", b.Spec.Command, err)
	}
	closeAll(inR, outW, errW) // the child has its copies
	b.proc, b.stdin, b.stdout = p, inW, outR
	b.log.Info("started", "pid", p.pid, "command", b.Spec.Command, "env", b.Spec.EnvKeys(), "inherit_env", b.Spec.InheritEnv)
	if p.unsupervised {
		b.log.Warn("started without a supervisor (no /proc?): a process it starts may outlive mcp-mux")
	}

	b.stderrR, b.stderrDone = errR, make(chan struct{})
	go func() {
		defer close(b.stderrDone)
		b.captureStderr(errR)
	}()
	go func() {
		b.exitErr = p.wait()
		close(b.exited)
	}()
	return nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func (b *Backend) clientOptions(h Hooks) *mcp.ClientOptions {
	call := func(f func()) {
		if f != nil {
			f()
		}
	}
	// A notification whose params are null or absent decodes to nil params:
	// one such line from a backend must cost nothing but a log line.
	dropped := func(method string) {
		b.log.Warn("notification without params, dropped", "method", method)
	}
	return &mcp.ClientOptions{
		// A backend of the current era that needs the agent's input returns
		// the requests in its result (input_required): mcp-mux passes them
		// to the agent or asks it itself, never the go-sdk (which would
		// answer them from handlers this client does not have).
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		// Exactly what the agent declared (never the go-sdk's default
		// roots): the requests go to the agent. No sampling or elicitation
		// handler is set, so the SDK infers nothing more; clientRequests
		// answers them instead, without the SDK's checks and rewrites.
		Capabilities: b.caps,
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			if r.Params == nil {
				dropped("notifications/elicitation/complete")
				return
			}
			if h.ElicitationComplete != nil {
				h.ElicitationComplete(r.Params)
			}
		},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { call(h.ToolsChanged) },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { call(h.PromptsChanged) },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { call(h.ResourcesChanged) },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if r.Params == nil {
				dropped("notifications/resources/updated")
				return
			}
			if h.ResourceUpdated != nil {
				h.ResourceUpdated(r.Params)
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if r.Params == nil {
				dropped("notifications/progress")
				return
			}
			if h.Progress != nil {
				h.Progress(r.Params)
			}
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			if r.Params == nil {
				dropped("notifications/message")
				return
			}
			if h.Log != nil {
				h.Log(r.Params)
				return
			}
			b.log.Debug("log message", "level", r.Params.Level, "logger", r.Params.Logger, "data", r.Params.Data)
		},
	}
}

// stderrTail formats the last stderr lines for an error message.
func (b *Backend) stderrTail() string {
	// Give the stderr reader a moment to catch the dying words.
	time.Sleep(20 * time.Millisecond)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.stderr) == 0 {
		return ""
	}
	return "; last stderr: " + strings.Join(b.stderr, " | ")
}

// monitor waits until the process exits or the connection breaks, makes sure
// both are down, and records why.
func (b *Backend) monitor() {
	sessionDone := make(chan struct{})
	go func() {
		b.session.Wait()
		close(sessionDone)
	}()
	var reason error
	select {
	case <-b.exited:
		reason = fmt.Errorf("process exited: %s", exitReason(b.exitErr))
	case <-sessionDone:
		// A dying process closes stdout before it is reaped: give the exit
		// status a moment, it says more than "connection closed". (200 ms
		// was too short on a loaded machine; only a process that closes
		// stdout and lives on waits all of it.)
		select {
		case <-b.exited:
			reason = fmt.Errorf("process exited: %s", exitReason(b.exitErr))
		case <-time.After(time.Second):
			reason = errors.New("connection closed")
		}
	case <-b.stopping:
		reason = errors.New("stopped")
	}
	select {
	case <-b.stopping:
		// Stop does the orderly shutdown; wait for it.
		<-b.exited
	default:
		b.kill()
	}
	b.stdout.Close()
	b.session.Close()
	b.mu.Lock()
	if b.killReason != nil {
		reason = b.killReason
	}
	b.mu.Unlock()
	select {
	case <-b.stopping:
		reason = ErrStopped
	default:
		reason = fmt.Errorf("%w%s", reason, b.stderrTail())
		b.log.Error("backend down", "reason", reason)
	}
	b.downErr = reason
	b.endStderr()
	close(b.done)
}

// ErrStopped is the Exited reason of a backend that was stopped on purpose.
var ErrStopped = errors.New("stopped")

func exitReason(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var es *exitStatus
	if errors.As(err, &es) && es.signal != "" {
		return "killed by signal " + es.signal
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
	}
	return err.Error()
}

// kill ends the whole process group at once (on Linux the supervisor ends
// what left the group too) and reaps the leader.
func (b *Backend) kill() {
	pid := b.proc.pid
	signalGroup(pid, syscall.SIGKILL)
	b.proc.cut()
	<-b.exited
	b.stdin.Close()
	waitGroupGone(pid, time.Second)
}

// Kill ends the backend's process group at once, for a backend that no
// longer answers; reason becomes its Err.
func (b *Backend) Kill(reason error) {
	if b.of != nil {
		b.of.Kill(reason) // hung for every view
		return
	}
	b.mu.Lock()
	if b.killReason == nil {
		b.killReason = reason
	}
	b.mu.Unlock()
	if b.remote != nil {
		b.remote.kill()
		return
	}
	signalGroup(b.proc.pid, syscall.SIGKILL)
	b.proc.cut()
}

// waitGroupGone polls until no process of the group is left, or d passed.
func waitGroupGone(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for groupAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop asks the backend to exit (stdin closed); after grace its process
// group gets SIGTERM, and what is left of it a moment later SIGKILL. It
// returns once the process is reaped and the group is gone, within about
// grace + 0.5 s. Safe to call more than once and concurrently.
func (b *Backend) Stop(grace time.Duration) {
	if b.of != nil {
		if b.detach(false) {
			b.of.Stop(grace)
		}
		return
	}
	b.stopOnce.Do(func() {
		b.grace = grace
		close(b.stopping)
		if b.remote != nil {
			return // monitorRemote ends the session, within grace
		}
		b.stopProcess(grace)
	})
	<-b.done
}

// Leave is Stop for mcp-mux's exit, which is to follow at once and does
// not wait: the backend's supervisor is told to stop it once mcp-mux is
// gone (the exit closes its stdin) as Stop would have: grace to exit,
// then SIGTERM, then SIGKILL. Until then nothing happens to the backend:
// were the backends asked before, the exits of many would take the CPU
// mcp-mux's own needs. False where there is no supervisor to leave it to
// (see Supervised) or it did not take the order (it is gone): Stop it. A
// remote backend needs nothing: its connections end with mcp-mux.
func (b *Backend) Leave(grace time.Duration) bool {
	if b.of != nil {
		return !b.detach(false) || b.of.Leave(grace)
	}
	return b.remote != nil || b.proc.leave(grace)
}

// stopProcess is Stop's sequence for a backend process.
func (b *Backend) stopProcess(grace time.Duration) {
	pid := b.proc.pid
	b.stdin.Close()
	// No grace (a signalled exit where there are no supervisors): SIGTERM
	// at once, with no warning for each backend.
	if grace > 0 {
		select {
		case <-b.exited:
		case <-time.After(grace):
			b.log.Warn("did not exit after stdin closed; sending SIGTERM", "grace", grace)
		}
	}
	// Whatever is left of the group (a stubborn leader, grandchildren
	// such as node under npx) gets a SIGTERM, then a SIGKILL. On Linux
	// the supervisor has done the same to the rest of the tree once
	// the backend exited, and the cut lifeline makes it kill anything
	// still below it (a process that left the group).
	signalGroup(pid, syscall.SIGTERM)
	waitGroupGone(pid, termWait)
	signalGroup(pid, syscall.SIGKILL)
	b.proc.cut()
	<-b.exited
	waitGroupGone(pid, time.Second)
	b.log.Info("stopped", "pid", pid)
}

// termWait is how long a process group gets between SIGTERM and SIGKILL.
const termWait = 300 * time.Millisecond

// Session is the MCP client session with the backend.
func (b *Backend) Session() *mcp.ClientSession {
	b = b.real()
	return b.session
}

// Settle waits (at most d) until the notifications the backend sent before
// now have been handled: call it when a response arrived, before passing
// it on, so that what the backend sent before it (progress, updates)
// reaches the agent before it too.
func (b *Backend) Settle(d time.Duration) {
	b = b.real()
	b.conn.settle(d)
}

// InitializeResult is what the backend answered to initialize.
func (b *Backend) InitializeResult() *mcp.InitializeResult {
	b = b.real()
	return b.init
}

// PID is the process id of the backend (the leader of its process group).
// A remote backend has none: 0.
func (b *Backend) PID() int {
	b = b.real()
	if b.proc == nil {
		return 0
	}
	return b.proc.pid
}

// Done is closed once the backend is down, stopped or crashed.
func (b *Backend) Done() <-chan struct{} {
	if b.view != nil {
		return b.view.done
	}
	return b.done
}

// Err says why the backend went down (exit status or signal, and its last
// stderr lines), or ErrStopped; nil while it runs.
func (b *Backend) Err() error {
	if v := b.view; v != nil {
		select {
		case <-v.done:
		default:
			return nil
		}
		v.e.pool.mu.Lock()
		moved := v.moved
		v.e.pool.mu.Unlock()
		if moved {
			return ErrMoved
		}
		if err := b.of.Err(); err != nil {
			return err
		}
		return ErrStopped // detached from a backend that serves on
	}
	select {
	case <-b.done:
		return b.downErr
	default:
		return nil
	}
}

// Capabilities returns the backend's server capabilities, never nil.
func (b *Backend) Capabilities() *mcp.ServerCapabilities {
	b = b.real()
	if b.init == nil || b.init.Capabilities == nil {
		return &mcp.ServerCapabilities{}
	}
	return b.init.Capabilities
}

// real is the running backend b is, or is a view of.
func (b *Backend) real() *Backend {
	if b.of != nil {
		return b.of
	}
	return b
}

// ModernEra is the first protocol revision of the current era (2026-07-28):
// no initialize, per-request _meta, multi-round-trip input requests.
const ModernEra = "2026-07-28"

// Modern reports whether mcp-mux speaks the current era with the backend.
func (b *Backend) Modern() bool {
	b = b.real()
	return b.init != nil && b.init.ProtocolVersion >= ModernEra
}

// SupportsSubscribe reports whether the backend advertised resources.subscribe.
func (b *Backend) SupportsSubscribe() bool {
	c := b.Capabilities()
	return c.Resources != nil && c.Resources.Subscribe
}
