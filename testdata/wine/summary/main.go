// Command summary reads the `go test -json` output of testdata/wine/run.sh
// and prints what run.sh reports: each package's counts, the output of
// every test that failed, every skip with its reason, and then the line
//
//	wine: N passed, N failed, N skipped
//
// where tests and subtests count alike. A package whose binary failed
// without a failed test (a panic, a timeout, a build error) counts as one
// failure. It exits 1 when anything failed or nothing ran.
//
//	summary FIRST [RETRY]
//
// RETRY is the output of a second run of the top-level tests that failed
// in FIRST: their results there replace the first ones, and a test that
// passed on the retry is listed as such. With -failed, summary prints the
// failed top-level tests of FIRST instead, one "package test" a line.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// run is what one go test -json stream said.
type run struct {
	pkgs      []string            // in order of their first result
	results   map[string]string   // "pkg test" → pass, fail or skip
	order     []string            // keys of results, in order
	output    map[string][]string // "pkg test" ("pkg " for the package) → its output
	pkgFailed map[string]bool     // failed without a failed test
	other     []string            // lines that are no events: go's own messages
}

func read(path string) (*run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := &run{results: map[string]string{}, output: map[string][]string{}, pkgFailed: map[string]bool{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	failedIn := map[string]bool{}
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			r.other = append(r.other, sc.Text())
			continue
		}
		if e.Action == "build-output" {
			r.other = append(r.other, strings.TrimRight(e.Output, "\n"))
			continue
		}
		if e.Package == "" {
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			r.output[key] = append(r.output[key], e.Output)
		case "pass", "fail", "skip":
			if !slices.Contains(r.pkgs, e.Package) {
				r.pkgs = append(r.pkgs, e.Package)
			}
			if e.Test == "" {
				// The package's end: a failure without a failed test is
				// the binary's (panic, timeout, build).
				if e.Action == "fail" && !failedIn[e.Package] {
					r.pkgFailed[e.Package] = true
				}
				continue
			}
			if e.Action == "fail" {
				failedIn[e.Package] = true
			}
			if _, seen := r.results[key]; !seen {
				r.order = append(r.order, key)
			}
			r.results[key] = e.Action
		}
	}
	return r, sc.Err()
}

// topFailed lists the failed top-level tests, "pkg test".
func (r *run) topFailed() []string {
	var out []string
	for _, key := range r.order {
		if r.results[key] == "fail" && !strings.Contains(key[strings.IndexByte(key, ' ')+1:], "/") {
			out = append(out, key)
		}
	}
	return out
}

// merge replaces the results of the tests retry ran (each top-level test
// it ran, with its subtests) by retry's, and returns the top-level tests
// that failed in r and passed in retry.
func (r *run) merge(retry *run) []string {
	var flaky []string
	for _, key := range retry.order {
		pkg, test, _ := strings.Cut(key, " ")
		if strings.Contains(test, "/") {
			continue
		}
		if r.results[key] == "fail" && retry.results[key] == "pass" {
			flaky = append(flaky, key)
		}
		r.order = slices.DeleteFunc(r.order, func(k string) bool {
			if k == key || strings.HasPrefix(k, key+"/") {
				delete(r.results, k)
				return true
			}
			return false
		})
		delete(r.pkgFailed, pkg)
	}
	for _, key := range retry.order {
		r.order = append(r.order, key)
		r.results[key] = retry.results[key]
		r.output[key] = retry.output[key]
	}
	for p, failed := range retry.pkgFailed {
		if failed {
			r.pkgFailed[p] = true
			r.output[p+" "] = retry.output[p+" "]
		}
	}
	r.other = append(r.other, retry.other...)
	return flaky
}

func main() {
	failed := flag.Bool("failed", false, "print the failed top-level tests, one \"package test\" a line")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: summary [-failed] FIRST [RETRY]")
		os.Exit(2)
	}
	r, err := read(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	if *failed {
		for _, key := range r.topFailed() {
			fmt.Println(key)
		}
		return
	}
	var flaky []string
	if flag.NArg() > 1 {
		retry, err := read(flag.Arg(1))
		if err != nil {
			fmt.Fprintln(os.Stderr, "summary:", err)
			os.Exit(2)
		}
		flaky = r.merge(retry)
	}
	if report(r, flaky, os.Stdout) {
		os.Exit(1)
	}
}

// report prints r and reports whether anything failed or nothing ran.
func report(r *run, flaky []string, w io.Writer) bool {
	type counts struct{ pass, fail, skip int }
	per := map[string]*counts{}
	var total counts
	var failed, skipped []string
	for _, key := range r.order {
		pkg, _, _ := strings.Cut(key, " ")
		c := per[pkg]
		if c == nil {
			c = &counts{}
			per[pkg] = c
		}
		switch r.results[key] {
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
	for _, p := range r.pkgs {
		c := per[p]
		if c == nil {
			c = &counts{}
		}
		fmt.Fprintf(w, "%-60s %4d passed, %d failed, %d skipped\n", p, c.pass, c.fail, c.skip)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
	}
	if len(r.other) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(r.other, "\n"))
	}
	for _, key := range failed {
		// A parent fails with its subtests: show the innermost only.
		if slices.ContainsFunc(failed, func(k string) bool { return strings.HasPrefix(k, key+"/") }) {
			continue
		}
		fmt.Fprintf(w, "\nFAIL %s\n%s", key, strings.Join(r.output[key], ""))
	}
	for _, p := range r.pkgs {
		if r.pkgFailed[p] {
			total.fail++
			fmt.Fprintf(w, "\nFAIL %s (the test binary failed, not a test)\n%s", p, strings.Join(r.output[p+" "], ""))
		}
	}
	if len(flaky) > 0 {
		fmt.Fprintf(w, "\nfailed, then passed when run again (counted as passed):\n")
		for _, key := range flaky {
			fmt.Fprintf(w, "  %s\n", key)
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(w, "\nskipped:\n")
		for _, key := range skipped {
			fmt.Fprintf(w, "  %s: %s\n", key, skipReason(r.output[key]))
		}
	}
	fmt.Fprintf(w, "\nwine: %d passed, %d failed, %d skipped\n", total.pass, total.fail, total.skip)
	return total.fail > 0 || total.pass == 0
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
