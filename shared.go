package main

// The shared mcp-mux: one long-lived process per config file (and build)
// serves every stdio session of the user's agents (issue 45). A launch by
// an agent becomes a thin session (package relay) that meets it (package
// rendezvous); `mcp-mux __shared` is the long-lived process, started by
// the first session. Sessions whose resolved config is the same (same
// session directory and environment as far as the backends see them, same
// --profile, --name and --tool-list) share one Mux, and so one instance of
// each backend; the others get a Mux of their own. It ends shared_linger
// after its last session.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/charmbracelet/log"
	"github.com/urfave/cli/v2"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/backends/wire"
	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/control"
	"github.com/mcp-mux/mcp-mux/mux/door"
	"github.com/mcp-mux/mcp-mux/mux/relay"
	"github.com/mcp-mux/mcp-mux/mux/rendezvous"
	"github.com/mcp-mux/mcp-mux/mux/tracing"
)

// SharedEnv set to 0 runs one launch in-process, as [mux] shared = false does.
const SharedEnv = "MCP_MUX_SHARED"

// sharedCommand is the long-lived process's, which sessions start.
const sharedCommand = "__shared"

// sharedWanted says whether a stdio launch of cfg is to be a session of
// the shared mcp-mux, and if not, why ("" when it was asked for).
func sharedWanted(cfg *config.File) (bool, string) {
	if v := os.Getenv(SharedEnv); v != "" {
		on := v != "0" && !strings.EqualFold(v, "false") && !strings.EqualFold(v, "no")
		return on, ""
	}
	if cfg.Mux.Shared != nil && !*cfg.Mux.Shared {
		return false, ""
	}
	return true, ""
}

// runSession relays this stdio launch to the shared mcp-mux. An error
// before the agent's first byte is read means it could not meet it: the
// caller serves in-process instead.
func runSession(ctx context.Context, cfg *config.File, c *cli.Context, toolList string, logger *log.Logger) (started bool, err error) {
	dir, err := rendezvous.Dir()
	if err != nil {
		return false, err
	}
	build, err := rendezvous.BuildID(dir)
	if err != nil {
		return false, err
	}
	place, err := rendezvous.For(dir, cfg.Path, build)
	if err != nil {
		return false, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return false, fmt.Errorf("finding the working directory: %w", err)
	}
	r, err := relay.Connect(relay.Options{
		Place: place,
		Hello: rendezvous.Hello{
			Build: build, Config: place.Config, Cwd: cwd, Environ: os.Environ(),
			Profile: c.String("profile"), ToolList: toolList, Name: strings.TrimSpace(c.String("name")), PID: os.Getpid(),
		},
		Spawn:   func() (<-chan struct{}, error) { return spawnShared(place) },
		Warn:    func(msg string) { logger.Warn(msg) },
		Drain:   cfg.Mux.RequestTimeout.Duration,
		MaxLine: cfg.Mux.MaxMessageSize,
	})
	if err != nil {
		return false, err
	}
	logger.Info("session of the shared mcp-mux", "pid", r.PID())
	defer forwardSIGHUP(r.PID)()
	go giveUpOnABlockedAgent(ctx, r, cfg.Mux.ShutdownGrace.Duration, logger) // owned: ends with the process
	oneThread()                                                              // a relay: two hand-offs per line (threads.go)
	in, restoreIn := pollable(os.Stdin)
	defer restoreIn()
	out, restoreOut := pollable(os.Stdout)
	defer restoreOut()
	return true, r.Run(ctx, pipeIO(in), pipeIO(out))
}

// giveUpOnABlockedAgent ends the process once the session is ending (a
// signal, or the agent's stdin ended) and a write to the agent has waited
// grace: an agent that no longer reads cannot be given what is left, and
// the write would hold the session forever, as an in-process mcp-mux's
// exit does not.
func giveUpOnABlockedAgent(ctx context.Context, r *relay.Relay, grace time.Duration, logger *log.Logger) {
	select {
	case <-ctx.Done():
	case <-r.StdinEnded():
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if r.Blocked() > grace {
			logger.Warn("exiting: the agent ended the session and no longer reads what is left for it", "waited", grace)
			os.Exit(0)
		}
	}
}

// maxSharedLog is the size past which the shared process's log (when the
// config names no log_file) is started anew.
const maxSharedLog = 4 << 20

// pipeIO is f read and written with raw system calls where it can be
// (wire.PipeIO: the runtime's bookkeeping of each call woke a thread).
func pipeIO(f *os.File) io.ReadWriter { return wire.PipeIO(f) }

// spawnShared starts the long-lived process of place from this very
// executable, in a session of its own (the agent's end does not end it),
// writing its log where its sessions' users can find it. ended is closed
// when it ends.
func spawnShared(place rendezvous.Place) (ended <-chan struct{}, err error) {
	exe, err := rendezvous.Executable()
	if err != nil {
		return nil, err
	}
	// One old log is kept: each process appends to it, and it must not
	// grow without end.
	if fi, err := os.Stat(place.LogPath()); err == nil && fi.Size() > maxSharedLog {
		os.Rename(place.LogPath(), place.LogPath()+".1")
	}
	logf, err := os.OpenFile(place.LogPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd, err := startDetached(func() *exec.Cmd {
		cmd := exec.Command(exe, sharedCommand, "--config", place.Config, "--build", place.Build)
		cmd.Env = append(os.Environ(), backends.StandbyEnv+"=1") // it will serve: its supervisor starts at once
		cmd.Stderr = logf
		cmd.Dir = place.Dir
		return cmd
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }() // reaps it if it ends before this session
	return done, nil
}

func sharedServeCommand() *cli.Command {
	return &cli.Command{
		Name:   sharedCommand,
		Hidden: true,
		Usage:  "the long-lived mcp-mux that sessions start (internal)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Required: true},
			&cli.StringFlag{Name: "build", Required: true},
		},
		Action: sharedServe,
	}
}

// sharedServe is the long-lived process.
func sharedServe(c *cli.Context) error {
	defer tuneGC()()
	// Its first session is on its way: the supervisor of its first backend
	// starts while it loads the config and listens.
	backends.StartStandby()
	path := c.String("config")
	cfg, err := config.LoadForServing(path)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	logger, closer, err := newLogger(cfg)
	if err != nil {
		logger, closer, _ = newLogger(&config.File{Mux: config.Settings{LogLevel: cfg.Mux.LogLevel}})
	}
	defer closer.Close()
	place, err := rendezvous.For("", path, c.String("build"))
	if err != nil {
		return cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	ln, err := rendezvous.Listen(place)
	if errors.Is(err, rendezvous.ErrRunning) {
		return nil // another session started it first
	}
	if err != nil {
		return cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	defer ln.Close()
	oneThread()
	d := &daemon{
		place: place, ln: ln, logger: logger, linger: cfg.Mux.SharedLinger.Duration,
		classes: map[string]*class{}, done: make(chan struct{}), pool: backends.NewPool(),
	}
	logger.Info("shared mcp-mux serving", "config", place.Config, "pid", os.Getpid())
	defer serveControlDoc(d.statusDocument, logger)()
	defer d.serveMetrics(cfg)() // shared_metrics.go
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sig)
	d.door = &door.SessionDoor{Admit: d.admit, Logger: logger}
	go d.door.Serve(ln)
	// A process whose first session never says hello ends too, but not
	// before that session could have.
	d.armLinger(2 * rendezvous.HelloTimeout)
	signalled := false
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				for _, m := range d.muxes() {
					m.Reload()
				}
				continue
			}
			logger.Info("shared mcp-mux stopping", "signal", s.String())
			signalled = true
			d.stop()
		case <-d.done:
		}
		break
	}
	d.wait(signalled)
	logger.Info("shared mcp-mux exiting")
	return nil
}

// daemon is the long-lived process's state.
type daemon struct {
	place  rendezvous.Place
	ln     *rendezvous.Listener
	logger *log.Logger
	linger time.Duration

	door *door.SessionDoor
	// pool runs a backend once for the classes whose instance of it
	// would run alike (backends.Identity).
	pool *backends.Pool

	mu       sync.Mutex
	classes  map[string]*class
	sessions int
	stopping bool
	lingerT  *time.Timer
	// nextClass numbers the classes made.
	nextClass int
	done      chan struct{} // closed when it is to end
}

// class is the sessions that share one Mux: one view of the config (the
// same project, profile, and environment as the backends get it). Its
// backends are shared with the other classes through the pool where they
// run alike.
type class struct {
	id     int // in the order they were made, for status
	m      *mux.Mux
	tracer *tracing.Tracer // nil: tracing off
	n      int             // its sessions
	idle   *time.Timer     // closes it shared_linger after its last session
	// expired is set when its linger ended while the process's did too:
	// the process's end ends it, unless a session comes first (join).
	expired bool
}

// admit is the session door's: the class of the session of h, or why it
// is refused.
func (d *daemon) admit(h *rendezvous.Hello) (door.StdioOptions, func(*door.StdioTransport) error, string) {
	switch {
	case h.V != rendezvous.Version || h.Build != d.place.Build:
		return door.StdioOptions{}, nil, rendezvous.RefusedBuild
	case h.Config != d.place.Config:
		return door.StdioOptions{}, nil, "another config file"
	}
	key, cfg, err := classOf(d.place.Config, h)
	if err != nil {
		return door.StdioOptions{}, nil, err.Error()
	}
	cl, ok := d.join(key, cfg, h)
	if !ok {
		return door.StdioOptions{}, nil, rendezvous.RefusedStopping
	}
	opts := door.StdioOptions{
		MaxLine: cfg.Mux.MaxMessageSize,
		Drain:   cfg.Mux.RequestTimeout.Duration,
		Logger:  d.logger,
		PID:     h.PID,
	}
	return opts, func(t *door.StdioTransport) error {
		defer d.leave(key, cl)
		if t == nil {
			return nil
		}
		return cl.m.Serve(context.Background(), t)
	}, ""
}

// classOf resolves the config for the session of h, in its environment,
// and names what its backends depend on: sessions of one name share a Mux.
func classOf(path string, h *rendezvous.Hello) (string, *config.File, error) {
	cfg, err := config.LoadForServingIn(path, h.Environ)
	if err != nil {
		return "", nil, err
	}
	if h.Profile != "" {
		if _, ok := cfg.Profile(h.Profile); !ok {
			return "", nil, mux.UnknownProfileError(cfg, h.Profile)
		}
	}
	sum := sha256.New()
	enc := json.NewEncoder(sum)
	// Each project a Mux of its own: its agents' roots are its own, and
	// a backend that asks for them gets an instance per set of roots
	// (backends.Pool); what runs alike is shared all the same.
	enc.Encode([]string{h.Profile, h.ToolList, h.Name, h.Cwd})
	enc.Encode(otelEnv(h.Environ))
	enc.Encode(cfg.Mux)
	enc.Encode(cfg.Profiles)
	for _, b := range cfg.Backends {
		enc.Encode(backendIdentity(b, h))
	}
	return hex.EncodeToString(sum.Sum(nil)), cfg, nil
}

// join adds a session of class key, making the class's Mux if it is the
// first; false once the process is stopping.
func (d *daemon) join(key string, cfg *config.File, h *rendezvous.Hello) (*class, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping {
		return nil, false
	}
	if d.lingerT != nil {
		d.lingerT.Stop()
		d.lingerT = nil
		// The process goes on: the classes whose linger ended meanwhile
		// close now.
		for k, c := range d.classes {
			if c.expired && k != key {
				delete(d.classes, k)
				go c.close()
			}
		}
	}
	cl := d.classes[key]
	if cl == nil {
		m := mux.New(cfg, d.logger, version, append(sessionOptions(h), mux.WithPool(d.pool))...)
		// Tracing as the session's environment asks (OTEL_*, part of
		// the class's key): the process's own is its first session's.
		tracer := startTracing(envLookup(h.Environ), d.logger)
		m.SetTracer(tracer)
		m.Start()
		if err := m.WatchConfig(); err != nil {
			d.logger.Warn("config changes are not applied by themselves (send SIGHUP to reload)", "err", err)
		}
		d.nextClass++
		cl = &class{id: d.nextClass, m: m, tracer: tracer}
		d.classes[key] = cl
	}
	if cl.idle != nil {
		cl.idle.Stop()
		cl.idle = nil
	}
	cl.expired = false
	cl.n++
	d.sessions++
	return cl, true
}

// leave ends a session of class key: shared_linger after the last one of
// a class its backends stop, and after the last one of all the process
// ends.
func (d *daemon) leave(key string, cl *class) {
	d.mu.Lock()
	cl.n--
	d.sessions--
	if cl.n == 0 {
		cl.idle = time.AfterFunc(d.linger, func() { d.closeIdle(key, cl) })
	}
	d.mu.Unlock()
	d.armLinger(0)
}

// closeIdle closes the Mux of class key if no session came back to it.
// When the process is ending too, its end takes the class: it leaves the
// backends to their supervisor and exits, as an in-process mcp-mux does,
// rather than wait while Close stops them one by one (or exit while it
// does, and have them killed with no grace).
func (d *daemon) closeIdle(key string, cl *class) {
	d.mu.Lock()
	idle := cl.n == 0 && d.classes[key] == cl
	if idle && d.sessions == 0 && (d.lingerT != nil || d.stopping) {
		cl.expired = true
		idle = false
	}
	if idle {
		delete(d.classes, key)
	}
	d.mu.Unlock()
	if idle {
		cl.close()
	}
}

// close closes the class's Mux, then sends its last spans.
func (cl *class) close() {
	cl.m.Close()
	cl.tracer.Shutdown(traceFlushTimeout)
}

// armLinger ends the process linger (at least least) after its last
// session, unless one comes.
func (d *daemon) armLinger(least time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sessions > 0 || d.stopping || d.lingerT != nil {
		return
	}
	linger := max(d.linger, least)
	d.lingerT = time.AfterFunc(linger, func() {
		d.mu.Lock()
		idle := d.sessions == 0
		d.mu.Unlock()
		if idle {
			d.stop()
		}
	})
}

// stop takes no more sessions: the sessions' connections end, the
// socket and the run lock go (the next session starts the next process),
// and the process exits once each Mux is closed.
func (d *daemon) stop() {
	d.mu.Lock()
	if d.stopping {
		d.mu.Unlock()
		return
	}
	d.stopping = true
	d.mu.Unlock()
	// The sessions' connections first: on Windows the pipe's name is free
	// for the next process only once every instance of it is closed.
	d.door.CloseAll()
	d.ln.Close()
	close(d.done)
}

// wait waits for every session to end, then ends every Mux as mcp-mux's
// exit does (signalled: the process got a signal): its backends are left
// to their supervisor, which stops them once the process is gone.
func (d *daemon) wait(signalled bool) {
	d.door.Wait()
	d.mu.Lock()
	classes := slices.Collect(maps.Values(d.classes))
	d.mu.Unlock()
	for _, cl := range classes {
		cl.m.Exit(signalled)
	}
	for _, cl := range classes {
		cl.tracer.Shutdown(traceFlushTimeout) // after Exit: the last spans go out
	}
}

func (d *daemon) muxes() []*mux.Mux {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*mux.Mux
	for _, cl := range d.classes {
		out = append(out, cl.m)
	}
	return out
}

// statusDocument is every class's, as one process.
// statusDocument is every class's, as one process. With more than one
// class, each session's id and each backend's name say which class (cN)
// it is of: two classes run two instances of a backend.
func (d *daemon) statusDocument() control.Document {
	classes := d.classesByID()
	doc := control.Document{Version: control.Version, PID: os.Getpid(), Config: d.place.Config, Sessions: []control.Session{}, Backends: []control.Backend{}}
	for i, cl := range classes {
		md := cl.m.StatusDocument()
		if i == 0 {
			doc = md
			doc.Sessions, doc.Backends = nil, nil
		}
		for _, s := range md.Sessions {
			if len(classes) > 1 {
				s.ID = fmt.Sprintf("c%d/%s", cl.id, s.ID)
			}
			doc.Sessions = append(doc.Sessions, s)
		}
		for _, b := range md.Backends {
			if len(classes) > 1 {
				// One process the classes share (backends.Pool) is one
				// row, naming each class it serves.
				if i := slices.IndexFunc(doc.Backends, func(o control.Backend) bool {
					return b.PID != 0 && o.PID == b.PID && strings.HasPrefix(o.Name, b.Name+" [")
				}); i >= 0 {
					o := &doc.Backends[i]
					o.Name = strings.TrimSuffix(o.Name, "]") + fmt.Sprintf(" c%d]", cl.id)
					o.Calls += b.Calls
					o.Errors += b.Errors
					continue
				}
				b.Name = fmt.Sprintf("%s [c%d]", b.Name, cl.id)
			}
			doc.Backends = append(doc.Backends, b)
		}
	}
	if doc.Sessions == nil {
		doc.Sessions = []control.Session{}
	}
	if doc.Backends == nil {
		doc.Backends = []control.Backend{}
	}
	doc.Shared = true
	return doc
}
