//go:build linux

package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// row is one line of the table.
type row struct {
	label  string
	key    string
	unit   func(float64) string
	ratio  bool   // relay and mcp-mux as ratios to direct
	target string // the target, "—" for none
	// met says whether mcp-mux's value v meets the target, given direct d.
	met func(d, v float64) bool
}

func (b *bench) rows() []row {
	atMost := func(r float64) func(d, v float64) bool { return func(d, v float64) bool { return v <= r*d } }
	atLeast := func(r float64) func(d, v float64) bool { return func(d, v float64) bool { return v >= r*d } }
	return []row{
		{"resources/read p50, 1 caller", mReadP50, dur, true, "≤ ×1.5", atMost(1.5)},
		{"resources/read p99, 1 caller", mReadP99, dur, true, "—", nil},
		{"tools/call p50, 1 caller", mCallP50, dur, true, "≤ ×1.5", atMost(1.5)},
		{"tools/call p99, 1 caller", mCallP99, dur, true, "—", nil},
		{"resources/read p50, 1 caller of the current era (2026-07-28)", mReadP50Now, dur, true, "≤ ×1.5", atMost(1.5)},
		{"tools/call p50, 1 caller of the current era", mCallP50Now, dur, true, "≤ ×1.5", atMost(1.5)},
		{"reads/s, 8 concurrent callers (one session)", mReads8, perSec, true, "≥ ×0.8", atLeast(0.8)},
		{"calls/s, 1 caller", mCalls1, perSec, true, "≥ ×0.65", atLeast(0.65)},
		{"server-everything (npm) in place of the fixture: resources/read p50, 1 caller", mEvReadP50, dur, true, "≤ ×1.5", atMost(1.5)},
		{"… tools/call p50, 1 caller", mEvCallP50, dur, true, "≤ ×1.5", atMost(1.5)},
		{"… reads/s, 8 concurrent callers (one session)", mEvReads8, perSec, true, "≥ ×0.8", atLeast(0.8)},
		{fmt.Sprintf("%s `resources/updated` burst: rate", count(float64(b.burstN))), mBurstRate, perSec, true, "≥ ×0.9", atLeast(0.9)},
		{"… of which lost", mBurstLost, count, false, "0", func(_, v float64) bool { return v == 0 }},
		{"spawn → first full tools/list, 1 backend", mSpawn, dur, true, "≤ ×1.5", atMost(1.5)},
		{"… of which until the initialize response", mSpawnInit, dur, true, "—", nil},
		{"10 backends × 200 ms start → first full tools/list (direct: one)", mStart10, dur, false, "≤ 250 ms", func(_, v float64) bool { return v <= 0.250 }},
		{"… of which until the initialize response", mStart10Ini, dur, false, "—", nil},
		{"… the 10 started at once, each on a session of its own (no mcp-mux: the machine's floor)", mStart10Bare, dur, false, "—", nil},
		{"resources/list of 10 × 1,000 resources, all pages (direct: 1 × 1,000)", mList, dur, false, "≤ 55 ms", func(_, v float64) bool { return v <= 0.055 }},
		{"process CPU, whole load run (the fixture; the relay; mcp-mux itself)", mCPU, secs, true, "≤ ×2", atMost(2)},
		{"… the backend's CPU in that run (everything below the process)", mCPUBackend, secs, true, "—", nil},
		{"peak RSS (VmHWM), 1 backend", mRSS, mb, false, "≤ 25 MB", func(_, v float64) bool { return v <= 25e6 }},
	}
}

func (b *bench) printTable(w io.Writer) {
	fmt.Fprintf(w, "## mcp-mux benchmark\n\n")
	fmt.Fprintf(w, "mcp-mux: %s. Fixture, relay and bridge built from this tree. %s %s/%s, %d CPUs. Medians of %d interleaved round(s); "+
		"%d requests per latency row, %v per throughput row, burst of %d.\n\n",
		b.muxFrom, runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), b.rounds, b.latencyN, b.duration, b.burstN)
	if b.before != "" {
		fmt.Fprintf(w, "mcp-mux (before): %s.\n\n", b.before)
	}
	if b.runs("stdio") {
		b.printStdio(w)
	}
	if b.runs("http") {
		if b.runs("stdio") {
			fmt.Fprintln(w)
		}
		b.printHTTP(w)
	}
	if b.runs("gosdk") {
		if b.only != "gosdk" {
			fmt.Fprintln(w)
		}
		b.printGoSDK(w)
	}
	if b.runs("search") {
		if b.only == "" {
			fmt.Fprintln(w)
		}
		b.printSearch(w)
	}
	if b.runs("catalog") {
		if b.only == "" {
			fmt.Fprintln(w)
		}
		b.printCatalog(w)
	}
	if b.runs("shared") {
		if b.only == "" {
			fmt.Fprintln(w)
		}
		b.printShared(w)
	}
	if len(b.warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, s := range b.warnings {
			fmt.Fprintln(w, "- "+s)
		}
	}
	fmt.Fprintf(w, "\nOther processes used %.0f%% of the machine's CPU while measuring. Total time: %v.\n",
		100*b.others, time.Since(b.started).Round(100*time.Millisecond))
}

// printStdio is the table of the stdio rows, the client's CPU in them and
// the CPU by process.
func (b *bench) printStdio(w io.Writer) {
	if b.before != "" {
		fmt.Fprintln(w, "| metric | direct | relay (floor) | mcp-mux (before) | mcp-mux | target | met |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	} else {
		fmt.Fprintln(w, "| metric | direct | relay (floor) | mcp-mux | target | met |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
	}
	for _, r := range b.rows() {
		d, dok := b.median(direct, r.key)
		cell := func(m mode) string {
			v, ok := b.median(m, r.key)
			switch {
			case !ok:
				return "—"
			case r.ratio && dok && d > 0:
				return fmt.Sprintf("×%.2f (%s)", v/d, r.unit(v))
			}
			return r.unit(v)
		}
		dcell := "—"
		if dok {
			dcell = r.unit(d)
		}
		if r.key == mList && dok {
			dcell += " per 1,000"
		}
		muxCell := func(m mode) string {
			c := cell(m)
			if v, ok := b.median(m, r.key); ok && dok && d > 0 && r.key == mList {
				c += fmt.Sprintf(" (×%.2f of 10 × direct)", v/(10*d))
			}
			return c
		}
		mcell := muxCell(muxed)
		if b.before != "" {
			mcell = muxCell(before) + " | " + mcell
		}
		met := ""
		if v, ok := b.median(muxed, r.key); ok && dok && r.met != nil {
			met = "no"
			if r.met(d, v) {
				met = "yes"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.label, dcell, cell(relay), mcell, r.target, met)
	}

	if b.everythingSkip != "" {
		fmt.Fprintf(w, "\nThe server-everything rows were not measured: %s.\n", b.everythingSkip)
	} else {
		fmt.Fprintln(w, "\nThe server-everything rows are the fairer comparison of a hop: the fixture, a go-sdk server on two threads, "+
			"spends more per request on its own hand-offs between them than a hop costs, and varies from run to run.")
	}
	fmt.Fprintf(w, "\nThe client's own CPU (this program, the go-sdk client) during the loaded rows, as a share of one core "+
		"(near 100%% would make the client the bottleneck; the machine has %d cores for the client, the hop and the fixture):\n\n", runtime.NumCPU())
	fmt.Fprint(w, "| row |")
	for _, m := range b.modes {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w, "\n|---|"+strings.Repeat("---|", len(b.modes)))
	for _, r := range []struct{ label, key string }{
		{"reads/s, 8 callers", cReads8}, {"calls/s, 1 caller", cCalls1}, {"burst", cBurst},
	} {
		fmt.Fprintf(w, "| %s |", r.label)
		for _, m := range b.modes {
			v, _ := b.median(m, r.key)
			fmt.Fprintf(w, " %.0f%% |", 100*v)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprint(w, "\nCPU of the last load run, by process:")
	for _, m := range b.modes[1:] {
		fmt.Fprintf(w, " %s: %s.", m, b.cpuInfo[m])
	}
	fmt.Fprintln(w)
}

// httpRow is one line of the HTTP table.
type httpRow struct {
	label     string
	key       string
	directKey string // direct's value, when it is another key's
	unit      func(float64) string
	ratio     bool // the other columns as ratios to direct
	sum       bool // the total over the rounds, not the median (errors)
	target    string
	met       func(d, v float64) bool // of mcp-mux's value v, direct's d
	note      func(m mode) string     // after m's value, if any
}

func (b *bench) httpRows() []httpRow {
	atMost := func(r float64) func(d, v float64) bool { return func(d, v float64) bool { return v <= r*d } }
	atLeast := func(r float64) func(d, v float64) bool { return func(d, v float64) bool { return v >= r*d } }
	zero := func(_, v float64) bool { return v == 0 }
	var rows []httpRow
	for _, n := range b.httpSessions {
		callsTarget, p50Target := "≥ ×0.9", "—"
		callsMet, p50Met := atLeast(0.9), (func(d, v float64) bool)(nil)
		if n == 1 {
			callsTarget, p50Target, callsMet, p50Met = "≥ ×0.75", "≤ ×1.4", atLeast(0.75), atMost(1.4)
		}
		label := count(float64(n)) + " sessions"
		if n == 1 {
			label = "1 session"
		}
		rows = append(rows,
			httpRow{label + ": calls/s", kHTTPCalls(n), "", perSec, true, false, callsTarget, callsMet, nil},
			httpRow{label + ": tools/call p50 (every call of that row)", kHTTPP50(n), "", dur, true, false, p50Target, p50Met, nil})
	}
	rows = append(rows,
		httpRow{"1 agent of the current era (2026-07-28: no session, each request on its own): calls/s, 1 caller", kModernCalls, "", perSec, true, false, "—", nil, nil},
		httpRow{"… tools/call p50", kModernP50, "", dur, true, false, "—", nil, nil},
		httpRow{"errors in the rows above: failed calls and sessions, all rounds", kHTTPErrors, "", count, false, true, "0", zero, nil},
		httpRow{"remote backend (stdio agent → mcp-mux → the fixture over HTTP; direct: the go-sdk client over HTTP to the fixture): tools/call p50, 1 caller",
			kRemoteP50, kHTTPP50(1), dur, true, false, "≤ ×1.4", atMost(1.4), nil},
		httpRow{"… calls/s, 1 caller", kRemoteCalls1, kHTTPCalls(1), perSec, true, false, "—", nil, nil})
	if slices.Contains(b.httpSessions, 8) {
		rows = append(rows, httpRow{"… calls/s, 8 concurrent callers in the one stdio session (direct: 8 HTTP sessions)",
			kRemoteCalls8, kHTTPCalls(8), perSec, true, false, "—", nil, nil})
	}
	rows = append(rows,
		httpRow{"… errors, all rounds", kRemoteErrors, "", count, false, true, "0", zero, nil},
		httpRow{"idle sessions, each having listed resources (one page) and holding one resources/subscribe: RSS (VmRSS) of the serving process with none (after one warm-up session)",
			kIdleRSS0, "", mb, false, false, "—", nil, nil})
	for _, n := range b.idleNs {
		note := func(m mode) string {
			if open, ok := b.median(m, kIdleOpen(n)); ok && open < float64(n) {
				return fmt.Sprintf(" (only %s opened: divided by that)", count(open))
			}
			return ""
		}
		ns := count(float64(n))
		// The target is for sessions that are idle: read again after
		// b.quiet when there is that row.
		opened := httpRow{label: fmt.Sprintf("… RSS per session at %s sessions, %v after the last opened: (RSS at %s − RSS with none) / %s", ns, b.settle, ns, ns),
			key: kIdleRSS(n), unit: kib, target: "—", note: note}
		if b.quiet == 0 {
			opened.target, opened.met = "≤ 64 KiB", func(_, v float64) bool { return v <= 64*1024 }
		}
		rows = append(rows, opened)
		if b.quiet > 0 {
			rows = append(rows, httpRow{label: fmt.Sprintf("… the same after %v more of idling", b.quiet),
				key: kQuietRSS(n), unit: kib, target: "≤ 64 KiB", met: func(_, v float64) bool { return v <= 64*1024 }, note: note})
		}
	}
	for _, n := range b.idleNs {
		rows = append(rows, httpRow{fmt.Sprintf("… goroutines per session at %s sessions (mcp-mux only: counted through MCP_MUX_PPROF)", count(float64(n))),
			kIdleGoroutines(n), "", tenths, false, false, "≤ 4", func(_, v float64) bool { return v <= 4 }, nil})
	}
	rows = append(rows, httpRow{"… sessions that failed to open or subscribe, all rounds", kIdleErrors, "", count, false, true, "0", zero, nil},
		httpRow{"idle agents of the current era, each holding two subscriptions/listen streams (the go-sdk client's own, for list changes, and one for a resource): RSS with none (after one warm-up session)",
			kListenRSS0, "", mb, false, false, "—", nil, nil})
	for _, n := range b.idleNs {
		ns := count(float64(n))
		rows = append(rows, httpRow{label: fmt.Sprintf("… RSS per agent at %s agents, %v after each had an update", ns, b.settle), key: kListenRSS(n), unit: kib, target: "—"})
		if b.quiet > 0 {
			rows = append(rows, httpRow{label: fmt.Sprintf("… the same after %v more of idling", b.quiet), key: kListenQuiet(n), unit: kib, target: "—"})
		}
		rows = append(rows, httpRow{label: fmt.Sprintf("… goroutines per agent at %s agents (mcp-mux only)", ns), key: kListenGoroutines(n), unit: tenths, target: "—"})
	}
	return append(rows, httpRow{"… agents whose stream failed, all rounds", kListenErrors, "", count, false, true, "0", zero, nil})
}

// printHTTP is the table of the HTTP rows and the client's CPU in them.
func (b *bench) printHTTP(w io.Writer) {
	fmt.Fprintf(w, "### Over HTTP\n\n")
	fmt.Fprintf(w, "go-sdk Streamable HTTP clients at protocol 2025-11-25, each session on connections of its own, one caller per session "+
		"calling the fixture's echo back to back for %v per row; p50 of every call of the row. direct: the fixture serving HTTP itself; "+
		"mcp-mux: `serve --http`, the fixture a stdio backend", b.duration)
	if b.mcpmu != "" {
		fmt.Fprintf(w, "; mcpmu: `%s serve --http --eager` (shared, not isolated), the same fixture", b.mcpmu)
	}
	fmt.Fprintf(w, ". Idle sessions: %s, the RSS read %v after the last opened", joinInts(b.idleNs, " and "), b.settle)
	if b.quiet > 0 {
		fmt.Fprintf(w, " and again %v later (goroutines then)", b.quiet)
	}
	fmt.Fprint(w, ".\n\n")
	cols := b.httpModes[1:]
	fmt.Fprint(w, "| metric | direct |")
	for _, m := range cols {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w, " target | met |")
	fmt.Fprintln(w, "|---|---|"+strings.Repeat("---|", len(cols))+"---|---|")
	for _, r := range b.httpRows() {
		value := b.median
		if r.sum {
			value = b.total
		}
		dk := r.key
		if r.directKey != "" {
			dk = r.directKey
		}
		d, dok := value(direct, dk)
		note := func(m mode) string {
			if r.note == nil {
				return ""
			}
			return r.note(m)
		}
		dcell := "—"
		if dok {
			dcell = r.unit(d) + note(direct)
		}
		fmt.Fprintf(w, "| %s | %s |", r.label, dcell)
		for _, m := range cols {
			v, ok := value(m, r.key)
			switch {
			case !ok:
				fmt.Fprint(w, " — |")
			case r.ratio && dok && d > 0:
				fmt.Fprintf(w, " ×%.2f (%s)%s |", v/d, r.unit(v), note(m))
			default:
				fmt.Fprintf(w, " %s%s |", r.unit(v), note(m))
			}
		}
		met := ""
		if v, ok := value(muxed, r.key); ok && r.met != nil && (dok || !r.ratio) {
			met = "no"
			if r.met(d, v) {
				met = "yes"
			}
		}
		fmt.Fprintf(w, " %s | %s |\n", r.target, met)
	}

	fmt.Fprint(w, "\nThe client's own CPU (this program) during the HTTP rows, as a share of one core:\n\n| row |")
	for _, m := range b.httpModes {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w, "\n|---|"+strings.Repeat("---|", len(b.httpModes)))
	cpuRow := func(label string, key func(m mode) string) {
		fmt.Fprintf(w, "| %s |", label)
		for _, m := range b.httpModes {
			if v, ok := b.median(m, key(m)); ok {
				fmt.Fprintf(w, " %.0f%% |", 100*v)
			} else {
				fmt.Fprint(w, " — |")
			}
		}
		fmt.Fprintln(w)
	}
	for _, n := range b.httpSessions {
		cpuRow(count(float64(n))+" HTTP session(s)", func(mode) string { return cHTTP(n) })
	}
	cpuRow("1 agent of the current era", func(mode) string { return cModern })
	cpuRow("remote backend, 1 caller (direct: 1 HTTP session)", func(m mode) string {
		if m == direct {
			return cHTTP(1)
		}
		return cRemote1
	})
	cpuRow("remote backend, 8 callers (direct: 8 HTTP sessions)", func(m mode) string {
		if m == direct {
			return cHTTP(8)
		}
		return cRemote8
	})
}

func dur(s float64) string {
	switch {
	case s < 1e-3:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

func secs(s float64) string { return fmt.Sprintf("%.2f s", s) }

func mb(v float64) string { return fmt.Sprintf("%.1f MB", v/1e6) }

func kib(v float64) string { return fmt.Sprintf("%.1f KiB", v/1024) }

func perSec(v float64) string { return count(v) + "/s" }

// count is v rounded, with thousands separated by commas.
func count(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// tenths is a number to one decimal place.
func tenths(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
