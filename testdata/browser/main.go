// Command browser stands for the user's browser in the tests of `mcp-mux
// login` ($BROWSER): it loads the URL it is given, following redirects as
// a browser does (to the authorization server, which approves at once, and
// back to mcp-mux's loopback listener), and with -record FILE writes there
// the URL it was given, then the status and the page it ended on.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	record := flag.String("record", "", "write the URL, then the status and page ended on, to this `FILE`")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: browser [-record FILE] URL")
		os.Exit(2)
	}
	u := flag.Arg(0)
	c := &http.Client{Timeout: 30 * time.Second}
	out := u + "\n"
	resp, err := c.Get(u)
	if err != nil {
		out += "error: " + err.Error() + "\n"
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		out += fmt.Sprintf("%d\n%s", resp.StatusCode, body)
	}
	if *record != "" {
		if err := os.WriteFile(*record, []byte(out), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err != nil {
		os.Exit(1)
	}
}
