// Command mcp-mux is one stdio MCP server that runs many: it starts the
// backends listed in a TOML file and serves their merged catalog.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // MCP_MUX_PPROF
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/charmbracelet/log"
	"github.com/muesli/termenv"
	"github.com/urfave/cli/v2"

	"github.com/mcp-mux/mcp-mux/backends"
	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/config"
	"github.com/mcp-mux/mcp-mux/mux/cores"
	"github.com/mcp-mux/mcp-mux/mux/door"
)

func main() {
	version = buildVersion()
	user := config.UserPath(nil) // this OS's, e.g. %APPDATA%\mcp-mux\config.toml on Windows
	if user == "" {
		user = "the user config directory's mcp-mux/config.toml"
	}
	configFlag := &cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "config `FILE` (default: $MCP_MUX_CONFIG, ./mcp-mux.toml, " + user + ")"}
	httpFlag := &cli.StringFlag{Name: "http", Usage: "serve over Streamable HTTP at `ADDR` (e.g. 127.0.0.1:8931), path /mcp, to any number of agents (default: [mux] http_listen; unset: stdio)"}
	profileFlag := &cli.StringFlag{Name: "profile", EnvVars: []string{"MCP_MUX_PROFILE"}, Usage: "serve the view of [profile.`NAME`]: only its backends run, only its tools are seen (stdio; over HTTP an agent asks with /mcp/NAME)"}
	nameFlag := &cli.StringFlag{Name: "name", EnvVars: []string{"MCP_MUX_NAME"}, Usage: "the `NAME` the agent registered mcp-mux under, if not mcp-mux: agents put it in the names of its tools, and an agent with a name limit gets shorter names for tools that would pass it"}
	toolListFlag := &cli.StringFlag{Name: "tool-list", EnvVars: []string{"MCP_MUX_TOOL_LIST"}, Usage: "give this stdio session the tool list `MODE`: all (every tool), search (the pinned tools, search_tools and the wrappers) or auto (by agent) (default: [mux] tool_list; over HTTP an agent asks with the Mcp-Mux-Tool-List header or ?tool_list=)"}
	app := &cli.App{
		Name:    "mcp-mux",
		Usage:   "one stdio MCP server that multiplexes many",
		Version: version,
		Flags:   []cli.Flag{configFlag, httpFlag, profileFlag, nameFlag, toolListFlag},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return unknownCommand(c)
			}
			return serve(c)
		},
		// Help, version and completion scripts go to stdout: they are what
		// was asked for. Nothing else of the CLI's own does (usage
		// mistakes are errors, see usageError): stdout is the MCP stream
		// when serving.
		Writer:               os.Stdout,
		ErrWriter:            os.Stderr,
		Suggest:              true,
		EnableBashCompletion: true,
		Commands: []*cli.Command{
			{Name: "serve", Usage: "serve MCP over stdio (the default), or over HTTP with --http", Flags: []cli.Flag{configFlag, httpFlag, profileFlag, nameFlag, toolListFlag}, Action: serve},
			{
				Name:      "check",
				Usage:     "validate a config; with --connect also start every backend and report what it offers",
				ArgsUsage: "[FILE]",
				Flags: []cli.Flag{
					configFlag,
					&cli.BoolFlag{Name: "connect", Usage: "start, initialize and list every backend, then stop them"},
					&cli.BoolFlag{Name: "list", Usage: "list the tool and prompt names the agent sees, per backend (implies --connect)"},
					&cli.BoolFlag{Name: "json", Usage: "print the result as JSON (and no progress lines)"},
				},
				Action: check,
			},
			importCommand(),
			initCommand(),
			loginCommand(configFlag),
			logoutCommand(configFlag),
			secretCommand(),
			statusCommand(),
			sharedServeCommand(),
			{Name: "version", Usage: "print the version", Action: func(c *cli.Context) error {
				fmt.Fprintln(os.Stdout, "mcp-mux", version)
				return nil
			}},
			completionCommand(),
		},
	}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, "mcp-mux", version) }
	app.OnUsageError = usageError
	for _, cmd := range app.Commands {
		cmd.OnUsageError = usageError
	}
	if err := app.Run(flagsFirst(app, os.Args)); err != nil {
		var ec cli.ExitCoder
		if errors.As(err, &ec) {
			if msg := ec.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, msg)
			}
			os.Exit(ec.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "mcp-mux:", err)
		os.Exit(1)
	}
}

// loadConfig finds and loads the config; a mistake in it is an exit-1 error
// listing every problem as FILE:LINE: message.
func loadConfig(c *cli.Context) (*config.File, error) {
	path, err := config.Find(givenConfig(c), os.Getenv)
	if err != nil {
		return nil, cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, cli.Exit(err.Error(), 1)
	}
	return cfg, nil
}

func newLogger(cfg *config.File) (*log.Logger, io.Closer, error) {
	var w io.Writer = os.Stderr
	var closer io.Closer = io.NopCloser(nil)
	if cfg.Mux.LogFile != "" {
		f, err := openLogFile(cfg.Mux.LogFile)
		if err != nil {
			return nil, nil, err
		}
		w, closer = f, f
	}
	// The log's styling library asks a terminal for its colours (OSC 10
	// and 11) when its writer is one, and waits for the answer: on a
	// terminal that never answers (script(1), some CI and editor ptys)
	// mcp-mux stalled 10 s before serving, and wrote the queries into the
	// user's terminal. It gets a writer that is no terminal to it, and the
	// colour profile the environment says (TERM, NO_COLOR), which needs no
	// query.
	profile := termenv.NewOutput(w).EnvColorProfile()
	logger := log.NewWithOptions(noTerminal{w}, log.Options{ReportTimestamp: true, Prefix: "mcp-mux"})
	logger.SetColorProfile(profile)
	level, err := log.ParseLevel(cfg.Mux.LogLevel)
	if err != nil {
		level = log.InfoLevel
	}
	logger.SetLevel(level)
	return logger, closer, nil
}

// noTerminal hides from the log's styling library that its writer is a
// terminal (see newLogger).
type noTerminal struct{ io.Writer }

// openLogFile opens the log file for appending. A new one is created 0600
// (logs show what backends print); an existing one keeps its mode. It must
// not be the file stdout goes to: the protocol would be corrupted. Loading
// the config refused the names of stdout already; the file stdout was
// redirected to shows only now, compared with what stdout is.
func openLogFile(path string) (*os.File, error) {
	isStdout := func(fi os.FileInfo) bool {
		out, err := os.Stdout.Stat()
		if err != nil || !os.SameFile(fi, out) {
			return false
		}
		// Nothing reads a stdout that is /dev/null.
		null, err := os.Stat(os.DevNull)
		return err != nil || !os.SameFile(fi, null)
	}
	errStdout := fmt.Errorf("log_file %s is the file mcp-mux's stdout goes to, which carries the MCP protocol: logs there would corrupt it (log to another file, or remove log_file to log to stderr)", path)
	if config.IsStdoutName(path) {
		return nil, errStdout
	}
	if fi, err := os.Stat(path); err == nil && isStdout(fi) {
		return nil, errStdout
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log_file: %w", err)
	}
	// Again on what was opened: the name may lead elsewhere by now.
	if fi, err := f.Stat(); err == nil && isStdout(fi) {
		f.Close()
		return nil, errStdout
	}
	return f, nil
}

func serve(c *cli.Context) error {
	defer tuneGC()()
	// One mistake in the file costs the backend it belongs to, not the
	// others (they serve, and the broken one says why): only a file that
	// cannot be read or parsed at all stops mcp-mux. check is strict.
	path, err := config.Find(givenConfig(c), os.Getenv)
	if err != nil {
		return cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	cfg, err := config.LoadForServing(path)
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	logger, closer, logErr := newLogger(cfg)
	if logErr != nil {
		// A log file that cannot be used costs the log file, not the
		// servers: the log goes to stderr, and says why.
		logger, closer, _ = newLogger(&config.File{Mux: config.Settings{LogLevel: cfg.Mux.LogLevel}})
		logger.Warn("log_file not used, logging to stderr: "+logErr.Error(), "path", cfg.Path)
	}
	defer closer.Close()
	logger.Info("config loaded", "path", cfg.Path, "backends", len(cfg.Backends))
	for _, w := range cfg.Warnings {
		logger.Warn(w.String())
	}
	addr := c.String("http")
	if addr == "" {
		addr = cfg.Mux.HTTPListen
	}
	toolList, err := toolListAsked(c, addr)
	if err != nil {
		return err
	}
	if addr == "" {
		// A log_file this process cannot use is not the shared
		// process's to use either: it may be the very file this
		// agent reads as stdout, which the shared process cannot tell.
		if on, _ := sharedWanted(cfg); on && logErr == nil {
			if name := c.String("profile"); name != "" {
				if _, ok := cfg.Profile(name); !ok {
					return cli.Exit("mcp-mux: "+mux.UnknownProfileError(cfg, name).Error(), 1)
				}
			}
			// Caught until the process is gone, as below.
			ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			started, err := runSession(ctx, cfg, c, toolList, logger)
			if started {
				if err != nil {
					logger.Error("the shared mcp-mux is gone", "err", err)
				}
				logger.Info("exiting")
				return nil
			}
			logger.Warn("serving in this process: the shared mcp-mux cannot be used ("+err.Error()+"); set [mux] shared = false to say so", "config", cfg.Path)
		}
	}
	// This process serves: the supervisor of its first backend starts
	// while the Mux is made (a session that relays starts none).
	backends.StartStandby()
	var ln net.Listener
	if addr != "" {
		if err := cfg.ServeHTTPCheck(addr); err != nil {
			return cli.Exit("mcp-mux: "+err.Error(), 1)
		}
		if ln, err = net.Listen("tcp", addr); err != nil {
			return cli.Exit("mcp-mux: "+err.Error(), 1)
		}
		defer ln.Close()
	}
	if addr := os.Getenv("MCP_MUX_PPROF"); addr != "" {
		// For measuring the real binary (testdata/bench counts goroutines
		// per session this way): net/http/pprof, on a loopback address only.
		if host, _, err := net.SplitHostPort(addr); err == nil && config.IsLoopbackHost(host) {
			if ln, err := net.Listen("tcp", addr); err == nil {
				defer ln.Close()
				go http.Serve(ln, http.DefaultServeMux) // ends when ln closes
			}
		}
	}
	if path := os.Getenv("MCP_MUX_CPUPROFILE"); path != "" {
		// For profiling the real binary over real pipes (see README,
		// Development): the profile is written when the session ends.
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}

	// The agent going away (stdin EOF) or a signal ends the session; then
	// every backend is stopped (see Mux.Exit). SIGHUP reloads the config
	// instead, as daemons do, as does saving the file. The signals stay
	// caught until mcp-mux is gone: on its way out, a second one (Claude
	// Code's SIGTERM 100 ms after its SIGINT) must change nothing, where
	// Go's default would end mcp-mux by it.
	var opts []mux.Option
	if name := c.String("profile"); name != "" {
		if addr != "" {
			return cli.Exit("mcp-mux: --profile (or MCP_MUX_PROFILE) is the view of a stdio session; over HTTP each agent asks for its own with the path /mcp/NAME or the Mcp-Mux-Profile header", 1)
		}
		if _, ok := cfg.Profile(name); !ok {
			return cli.Exit("mcp-mux: "+mux.UnknownProfileError(cfg, name).Error(), 1)
		}
		opts = append(opts, mux.WithProfile(name))
	}
	if name := strings.TrimSpace(c.String("name")); name != "" {
		opts = append(opts, mux.WithName(name))
	}
	if toolList != "" {
		opts = append(opts, mux.WithToolList(toolList))
	}
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	var secondSignal <-chan struct{}
	if addr != "" {
		// serve --http drains at the first signal; the second ends the
		// drain at once (an operator who wants it gone now).
		secondSignal = signalled(2, syscall.SIGTERM, syscall.SIGINT)
	}
	everyCore()
	m := mux.New(cfg, logger, version, opts...)
	tracer := startTracing(os.Getenv, logger) // traces.go
	m.SetTracer(tracer)
	defer tracer.Shutdown(traceFlushTimeout) // after m.Exit: the last spans go out
	m.Start()
	// After Start, which decodes the remembered catalogs on every core
	// (threads.go).
	var threads *cores.Rule
	if addr != "" {
		threads = httpThreads()
	} else {
		oneThread()
	}
	// Before the control endpoint, whose document says where the metrics are.
	metrics, metricsDone := serveMetrics(m, cfg, logger)
	defer metricsDone()
	defer serveControl(m, metrics, logger)()
	if err := m.WatchConfig(); err != nil {
		logger.Warn("config changes are not applied by themselves (send SIGHUP to reload)", "err", err)
	}
	defer reloadOnSIGHUP(m)()
	if addr != "" {
		// Over HTTP, for any number of agents, until a signal ends it;
		// stdin is not the protocol then.
		o := door.HTTPOptions{
			Token:        cfg.Mux.HTTPToken,
			Tokens:       cfg.Tokens,
			SessionIdle:  cfg.Mux.HTTPSessionIdle.Duration,
			MaxBody:      int64(cfg.Mux.MaxMessageSize),
			DrainTimeout: cfg.Mux.DrainTimeout.Duration,
			Stop:         secondSignal,
		}
		if threads != nil {
			o.WorkBegan, o.WorkEnded = threads.Begin, threads.End
		}
		stopThreads := runThreads(ctx, threads)
		err = m.ServeHTTP(ctx, ln, o)
		stopThreads()
		m.Exit(ctx.Err() != nil)
		if err != nil {
			logger.Error("serving over HTTP", "err", err)
		}
		logger.Info("exiting")
		return nil
	}
	in, restoreIn := pollable(os.Stdin)
	defer restoreIn()
	out, restoreOut := pollable(os.Stdout)
	defer restoreOut()
	err = m.Serve(ctx, door.Stdio(in, out, door.StdioOptions{
		MaxLine: cfg.Mux.MaxMessageSize,
		Drain:   cfg.Mux.RequestTimeout.Duration,
		Logger:  logger,
	}))
	m.Exit(ctx.Err() != nil)
	if err != nil && ctx.Err() == nil {
		logger.Debug("session ended", "err", err)
	}
	logger.Info("exiting")
	return nil
}

// toolListAsked is the tool list --tool-list (or MCP_MUX_TOOL_LIST) asks
// for, "" if none; a mistake in it is an exit-1 error, as is asking for
// one over HTTP (addr), where each agent asks for its own.
func toolListAsked(c *cli.Context, addr string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(c.String("tool-list")))
	switch v {
	case "":
		return "", nil
	case config.ToolListAll, config.ToolListSearch, config.ToolListAuto:
	default:
		return "", cli.Exit(fmt.Sprintf("mcp-mux: --tool-list (or MCP_MUX_TOOL_LIST) must be %q (every tool), %q (the pinned tools, search_tools and the wrappers) or %q (by agent) (got %q)",
			config.ToolListAll, config.ToolListSearch, config.ToolListAuto, c.String("tool-list")), 1)
	}
	if addr != "" {
		return "", cli.Exit("mcp-mux: --tool-list (or MCP_MUX_TOOL_LIST) is the tool list of a stdio session; over HTTP each agent asks for its own with the "+door.ToolListHeader+" header or ?tool_list= on the URL", 1)
	}
	return v, nil
}

func check(c *cli.Context) error {
	given, err := checkFile(c)
	if err != nil {
		return err
	}
	path, err := config.Find(given, os.Getenv)
	if err != nil {
		return cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	// With --connect a mistake costs the backend it belongs to, as it does
	// when serving: the others are still started and reported, and the
	// mistakes fail the check in the report. Without it, check is strict.
	connect := c.Bool("connect") || c.Bool("list")
	load := config.Load
	if connect {
		load = config.LoadForServing
	}
	cfg, err := load(path)
	if err != nil {
		var ce *config.Error
		if c.Bool("json") && errors.As(err, &ce) {
			writeJSON(map[string]any{"config": path, "ok": false, "problems": ce.Problems})
			return cli.Exit("", 1)
		}
		return cli.Exit(err.Error(), 1)
	}
	if !c.Bool("json") {
		for _, w := range cfg.Warnings {
			// LoadForServing keeps the mistakes outside every backend
			// among the warnings too, for serve's log: they are not
			// warnings here, the report lists them as mistakes.
			if !slices.Contains(cfg.Problems, w) {
				fmt.Fprintln(os.Stderr, "warning: "+w.String())
			}
		}
	}
	if err := mux.CatalogsProblem(); err != nil {
		// Not the config's: the environment's, with both check and check
		// --connect, and either output.
		fmt.Fprintln(os.Stderr, "warning: "+err.Error())
	}
	if !connect {
		plans := mux.StartPlans(cfg)
		catalog := mux.CatalogWarnings(cfg)
		if c.Bool("json") {
			writeJSON(map[string]any{"config": path, "ok": true, "problems": []config.Problem{}, "warnings": append([]config.Problem{}, cfg.Warnings...), "catalog_warnings": catalog, "starts": plans})
		} else {
			fmt.Fprintf(os.Stdout, "%s: OK (%s)\n", path, count(len(cfg.Backends), "backend"))
			writeStartPlans(os.Stdout, plans)
			for _, w := range catalog {
				fmt.Fprintln(os.Stdout, "warning: "+w)
			}
		}
		return nil
	}
	logger, closer, err := newLogger(cfg)
	if err != nil {
		return cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	defer closer.Close()
	if cfg.Mux.LogFile == "" && cfg.Mux.LogLevel != "debug" {
		// The report is the output; backends' chatter would drown it, and
		// what goes wrong (collisions, failures) is in the report.
		logger.SetLevel(log.FatalLevel)
	}
	// Ctrl-C while backends start (each may take startup_timeout) ends the
	// check at once, and the backends it started are stopped.
	ctx, caught, stop := signalContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var opts []mux.InspectOption
	var p *progress
	if !c.Bool("json") {
		// Live on a terminal, unless the log goes there too.
		live := isTerminal(os.Stderr) && (cfg.Mux.LogFile != "" || cfg.Mux.LogLevel != "debug")
		p = newProgress(os.Stderr, live, cfg)
		opts = append(opts, mux.OnSettled(p.settled))
	}
	backends.StartStandby()
	everyCore() // backends start and catalogs decode on every core
	report := mux.Inspect(ctx, cfg, logger, version, opts...)
	if p != nil {
		p.close()
	}
	if !c.Bool("list") {
		report.Offered = nil
	}
	if sig := caught(); sig != 0 {
		name := map[syscall.Signal]string{syscall.SIGINT: "SIGINT (Ctrl-C)", syscall.SIGTERM: "SIGTERM"}[sig]
		return cli.Exit(fmt.Sprintf("mcp-mux: check interrupted by %s; every backend it started is stopped", name), 128+int(sig))
	}
	if c.Bool("json") {
		writeJSON(report)
	} else {
		writeReport(os.Stdout, report, backendLabeler(cfg))
	}
	if !report.OK {
		return cli.Exit("", 1)
	}
	return nil
}

// writeStartPlans says when each backend starts: at once, or when the
// agent first uses it because its catalog is remembered (and since when);
// one whose last start failed says why, and starts at once.
func writeStartPlans(w io.Writer, plans []mux.StartPlan) {
	for _, p := range plans {
		switch {
		case p.LastFailure != nil:
			fmt.Fprintf(w, "  %s: its last start failed (%s: %s): starts at once to try again\n",
				p.Name, p.LastFailure.At.Local().Format("2006-01-02 15:04"), p.LastFailure.Reason)
		case p.Remembered && p.ByCheckOnly:
			fmt.Fprintf(w, "  %s: remembered (%s, %s, %s; seen %s) by check --connect: starts when first used by an agent that declares no capabilities; one that declares some (Claude Code, Codex, Gemini CLI, opencode and Copilot CLI each do) starts it once, to remember it for itself\n",
				p.Name, count(p.Tools, "tool"), count(p.Prompts, "prompt"), count(p.Resources, "resource"), p.Seen.Local().Format("2006-01-02 15:04"))
		case p.Remembered:
			fmt.Fprintf(w, "  %s: remembered (%s, %s, %s; seen %s): starts when first used\n",
				p.Name, count(p.Tools, "tool"), count(p.Prompts, "prompt"), count(p.Resources, "resource"), p.Seen.Local().Format("2006-01-02 15:04"))
		case p.Start == config.StartEager:
			fmt.Fprintf(w, "  %s: starts at once (start = \"eager\")\n", p.Name)
		case p.NoMemory && os.Getenv(mux.CatalogsEnv) == "off":
			fmt.Fprintf(w, "  %s: starts at once (%s=off: nothing is remembered)\n", p.Name, mux.CatalogsEnv)
		case p.NoMemory:
			fmt.Fprintf(w, "  %s: starts at once (nothing is remembered: see the warning about %s)\n", p.Name, mux.CatalogsEnv)
		default:
			fmt.Fprintf(w, "  %s: not seen yet: starts at once (an agent's first session remembers it)\n", p.Name)
		}
	}
}

// signalled is closed once n of sigs have come. Its goroutine waits for
// them as long as the process lives, as signal.NotifyContext's does.
func signalled(n int, sigs ...os.Signal) <-chan struct{} {
	ch := make(chan os.Signal, n)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		for range n {
			<-ch
		}
		close(done)
	}()
	return done
}

// signalContext is signal.NotifyContext that also tells which signal
// ended ctx (0 if none), for the exit code 128+signal.
func signalContext(parent context.Context, sigs ...os.Signal) (ctx context.Context, caught func() syscall.Signal, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	var got syscall.Signal
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-ch:
			got, _ = s.(syscall.Signal)
			cancel()
		case <-ctx.Done():
		}
	}()
	caught = func() syscall.Signal {
		if ctx.Err() == nil {
			return 0
		}
		cancel()
		<-done
		return got
	}
	stop = func() {
		signal.Stop(ch)
		cancel()
		<-done
	}
	return ctx, caught, stop
}

func writeJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// writeReport prints a check --connect report as a table per backend, each
// headed by its label (backendLabeler), then the collisions.
func writeReport(w io.Writer, r *mux.Report, label func(name string) string) {
	fmt.Fprintf(w, "config: %s\n\n", r.Config)
	for _, b := range r.Backends {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, label(b.Name))
		fmt.Fprintf(tw, "  state\t%s\n", b.State)
		if b.LastError != "" {
			fmt.Fprintf(tw, "  error\t%s\n", b.LastError)
		}
		if b.URL != "" {
			fmt.Fprintf(tw, "  url\t%s\n", b.URL)
		}
		switch {
		case b.SignIn != "" && b.Issuer != "":
			fmt.Fprintf(tw, "  sign-in\t%s (by %s)\n", b.SignIn, b.Issuer)
		case b.SignIn != "":
			fmt.Fprintf(tw, "  sign-in\t%s\n", b.SignIn)
		}
		if b.Ready() {
			fmt.Fprintf(tw, "  transport\t%s\n", b.Transport)
			fmt.Fprintf(tw, "  protocol\t%s\n", b.ProtocolVersion)
			fmt.Fprintf(tw, "  server\t%s\n", b.Server)
			fmt.Fprintf(tw, "  subscribe\t%s\n", yesNo(b.Subscribe != nil && *b.Subscribe))
			fmt.Fprintf(tw, "  listChanged\t%s\n", strings.Join(append([]string{}, b.ListChanged...), ", "))
			fmt.Fprintf(tw, "  resources\t%d\n", b.Resources)
			fmt.Fprintf(tw, "  templates\t%d\n", b.Templates)
			fmt.Fprintf(tw, "  tools\t%d\n", b.Tools)
			fmt.Fprintf(tw, "  prompts\t%d\n", b.Prompts)
		}
		tw.Flush()
		for _, o := range r.Offered {
			if o.Backend == b.Name && b.Ready() {
				writeNames(w, "tool names", o.Tools)
				writeNames(w, "prompt names", o.Prompts)
			}
		}
		fmt.Fprintln(w)
	}
	if len(r.Collisions) == 0 {
		fmt.Fprintln(w, "collisions: none")
	} else {
		fmt.Fprintf(w, "collisions: %d (the first backend in config order wins)\n", len(r.Collisions))
		for _, c := range r.Collisions {
			if c.Fixed != "" {
				fmt.Fprintf(w, "  %s %q: both %s and %s have it; %s's is %s through mcp-mux (nothing hidden)\n", c.Kind, c.Name, c.Winner, c.Loser, c.Loser, c.Fixed)
				continue
			}
			fmt.Fprintf(w, "  %s %q: %s wins over %s\n", c.Kind, c.Name, c.Winner, c.Loser)
		}
	}
	for _, h := range r.Hidden {
		fmt.Fprintln(w, "ERROR: "+h)
	}
	for _, p := range r.Problems {
		fmt.Fprintln(w, "ERROR: "+p.String())
	}
	for _, warning := range r.Warnings {
		fmt.Fprintln(w, "warning: "+warning)
	}
	switch {
	case r.OK:
		fmt.Fprintln(w, "\nOK: every backend started")
	case len(r.Problems) > 0:
		fmt.Fprintln(w, "\nFAIL: the config has mistakes (see ERROR above); a backend with one was not started")
	case len(r.Hidden) > 0:
		fmt.Fprintln(w, "\nFAIL: a collision hides a resource a tool needs (see ERROR above)")
	default:
		fmt.Fprintln(w, "\nFAIL: some backends did not start")
	}
}

// writeNames lists names one per line (they can be long, and are
// copied into an agent's allow list).
func writeNames(w io.Writer, what string, names []string) {
	fmt.Fprintf(w, "  %s (%d):\n", what, len(names))
	for _, n := range names {
		fmt.Fprintf(w, "    %s\n", n)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
