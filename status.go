package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/charmbracelet/log"
	"github.com/urfave/cli/v2"

	"github.com/mcp-mux/mcp-mux/mux"
	"github.com/mcp-mux/mcp-mux/mux/control"
)

// `mcp-mux status`: what every running mcp-mux of the user's is doing,
// asked of each on its control endpoint (mux/control), which serve opens.

// serveControl opens this mcp-mux's control endpoint and returns what
// closes it (and removes it). Without one, mcp-mux serves all the same:
// only `status` does not see it. metrics is the URL it serves metrics on
// ("" if none; metrics.go), for a second mcp-mux that finds the port taken.
func serveControl(m *mux.Mux, metrics string, logger *log.Logger) (stop func()) {
	return serveControlDoc(func() control.Document {
		doc := m.StatusDocument()
		doc.Metrics = metrics
		return doc
	}, logger)
}

// serveControlDoc answers `mcp-mux status` with document until stop.
func serveControlDoc(document func() control.Document, logger *log.Logger) (stop func()) {
	srv, err := control.Listen(document)
	if err != nil {
		logger.Warn("mcp-mux status will not see this mcp-mux: no control endpoint", "err", err)
		return func() {}
	}
	logger.Debug("control endpoint", "addr", srv.Addr())
	return func() { srv.Close() }
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show every running mcp-mux of yours: its sessions, and each backend's state, restarts, last error, calls and latency",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print one JSON document"},
			&cli.BoolFlag{Name: "watch", Aliases: []string{"w"}, Usage: "redraw it in place each second until q or Ctrl-C (off a terminal: print it again each second)"},
			&cli.IntFlag{Name: "pid", Usage: "only the mcp-mux of process `N`"},
		},
		Action: status,
	}
}

// statusReport is `status --json`'s document: every mcp-mux found.
type statusReport struct {
	Version   int                 `json:"version"`
	Processes []*control.Document `json:"processes"`
}

func status(c *cli.Context) error {
	if c.Args().Present() {
		return cli.Exit("mcp-mux: status takes no arguments (--pid N picks one mcp-mux)", 2)
	}
	pid := c.Int("pid")
	if c.Bool("watch") {
		if c.Bool("json") {
			return cli.Exit("mcp-mux: status: --watch and --json do not go together (--json prints once)", 2)
		}
		return watchStatus(pid)
	}
	docs, problems := collectStatus(pid)
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "mcp-mux: status: "+p)
	}
	if pid != 0 && len(docs) == 0 {
		return cli.Exit(fmt.Sprintf("mcp-mux: no mcp-mux of yours with pid %d is running", pid), 1)
	}
	if c.Bool("json") {
		writeJSON(statusReport{Version: control.Version, Processes: docs})
		return nil
	}
	writeStatus(os.Stdout, docs)
	return nil
}

// collectStatus asks each running mcp-mux (only pid's, if not 0) for its
// status; problems are what could not be asked, and why.
func collectStatus(pid int) (docs []*control.Document, problems []string) {
	docs = []*control.Document{}
	eps, err := control.Find(func(s string) { problems = append(problems, s) })
	if err != nil {
		return docs, append(problems, err.Error())
	}
	for _, ep := range eps {
		if pid != 0 && ep.PID != pid {
			continue
		}
		doc, err := control.Query(ep)
		switch {
		case err == control.ErrGone:
		case err != nil:
			problems = append(problems, err.Error())
		default:
			docs = append(docs, doc)
		}
	}
	return docs, problems
}

// writeStatus prints docs as plain text: a few lines and a table of
// backends per mcp-mux. What the processes report (names, errors, an
// agent's name) is shown without control characters: it cannot move the
// cursor or colour the terminal.
func writeStatus(w io.Writer, docs []*control.Document) {
	if len(docs) == 0 {
		fmt.Fprintln(w, "no mcp-mux is running")
		return
	}
	for i, d := range docs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		kind := "mcp-mux"
		if d.Shared {
			kind = "shared mcp-mux"
		}
		fmt.Fprintf(w, "%s pid %d, up %s, config %s\n", kind, d.PID, time.Duration(d.Uptime*float64(time.Second)), printable(d.Config))
		if d.Version > control.Version {
			fmt.Fprintf(w, "  (status version %d, newer than this mcp-mux's %d: some of it is not shown)\n", d.Version, control.Version)
		}
		if len(d.Sessions) == 0 {
			fmt.Fprintln(w, "  sessions: none")
		}
		for _, s := range d.Sessions {
			client := s.Client
			if client == "" {
				client = "(not initialized)"
			}
			var more []string
			if s.PID != 0 {
				more = append(more, fmt.Sprintf("pid %d", s.PID))
			}
			if s.Token != "" {
				more = append(more, "token "+printable(s.Token))
			}
			if s.Profile != "" {
				more = append(more, "profile "+printable(s.Profile))
			}
			if len(s.Backends) > 0 {
				more = append(more, "uses "+printable(strings.Join(s.Backends, ", ")))
			}
			extra := ""
			if len(more) > 0 {
				extra = " (" + strings.Join(more, "; ") + ")"
			}
			fmt.Fprintf(w, "  session %s: %s%s\n", printable(s.ID), printable(client), extra)
		}
		if len(d.Backends) == 0 {
			fmt.Fprintln(w, "  backends: none")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  BACKEND\tSTATE\tPID\tRESTARTS\tCALLS\tERRORS\tP50\tP95\tLAST ERROR")
		for _, b := range d.Backends {
			pid, lastErr := "-", "-"
			if b.PID != 0 {
				pid = fmt.Sprint(b.PID)
			}
			if b.LastError != "" {
				lastErr = printable(b.LastError)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", printable(b.Name), printable(b.State), pid, b.Restarts,
				b.Calls, b.Errors, latency(b.Calls, b.P50), latency(b.Calls, b.P95), lastErr)
		}
		tw.Flush()
	}
}

// latency is ms, a percentile in milliseconds, as the table shows it.
func latency(calls int64, ms float64) string {
	switch {
	case calls == 0:
		return "-"
	case ms < 10:
		return fmt.Sprintf("%.1fms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0fms", ms)
	}
	return fmt.Sprintf("%.1fs", ms/1000)
}

// printable is s on one line, its control characters (escape sequences,
// tabs that would break the table) as spaces, cut at 160 characters.
func printable(s string) string {
	s = strings.Join(strings.FieldsFunc(s, unicode.IsControl), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}
