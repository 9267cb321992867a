// Command summary reads `go test -json` from stdin and prints what
// testdata/wine/run.sh reports: each package's counts, the output of every
// test that failed, every skip with its reason, and then the one line
//
//	wine: N passed, N failed, N skipped
//
// where tests and subtests count alike. A package whose binary failed
// without a failed test (a panic, a timeout, a build error) counts as one
// failure. It exits 1 when anything failed or nothing ran.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build output
	FailedBuild string
}

type pkgCount struct{ pass, fail, skip int }

func main() {
	out, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	if out != 0 {
		os.Exit(1)
	}
}

func summarize(in io.Reader, w io.Writer) (int, error) {
	output := map[string][]string{} // package + " " + test: its output
	counts := map[string]*pkgCount{}
	var pkgs []string
	var failed, skipped []string // package + " " + test
	var pkgFailed []string       // packages that failed without a failed test
	var buildOut []string
	count := func(p string) *pkgCount {
		if counts[p] == nil {
			counts[p] = &pkgCount{}
			pkgs = append(pkgs, p)
		}
		return counts[p]
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event: go's own message (a build failure, say).
			buildOut = append(buildOut, sc.Text())
			continue
		}
		if e.Action == "build-output" {
			buildOut = append(buildOut, strings.TrimRight(e.Output, "\n"))
			continue
		}
		if e.Package == "" {
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			output[key] = append(output[key], e.Output)
		case "pass", "fail", "skip":
			c := count(e.Package)
			if e.Test == "" {
				// The package's own end: a failure without a failed test
				// is the binary's (panic, timeout, build).
				if e.Action == "fail" && c.fail == 0 {
					pkgFailed = append(pkgFailed, e.Package)
				}
				continue
			}
			switch e.Action {
			case "pass":
				c.pass++
			case "fail":
				c.fail++
				failed = append(failed, key)
			case "skip":
				c.skip++
				skipped = append(skipped, key)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 1, err
	}

	var total pkgCount
	for _, p := range pkgs {
		c := counts[p]
		fmt.Fprintf(w, "%-60s %4d passed, %d failed, %d skipped\n", p, c.pass, c.fail, c.skip)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
	}
	if len(buildOut) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(buildOut, "\n"))
	}
	for _, key := range failed {
		// A parent fails with its subtests: show the innermost only.
		if slices.ContainsFunc(failed, func(k string) bool { return strings.HasPrefix(k, key+"/") }) {
			continue
		}
		fmt.Fprintf(w, "\nFAIL %s\n%s", key, strings.Join(output[key], ""))
	}
	for _, p := range pkgFailed {
		total.fail++
		fmt.Fprintf(w, "\nFAIL %s (the test binary failed, not a test)\n%s", p, strings.Join(output[p+" "], ""))
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "\nskipped:\n")
		for _, key := range skipped {
			fmt.Fprintf(w, "  %s: %s\n", key, skipReason(output[key]))
		}
	}
	fmt.Fprintf(w, "\nwine: %d passed, %d failed, %d skipped\n", total.pass, total.fail, total.skip)
	if total.fail > 0 || total.pass == 0 {
		return 1, nil
	}
	return 0, nil
}

// skipReason is the message a skipped test logged: its output less the
// "=== RUN" and "--- SKIP" lines.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") {
			continue
		}
		msg = append(msg, t)
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}
