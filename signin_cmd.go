package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/mcp-mux/mcp-mux/backends/oauth"
	"github.com/mcp-mux/mcp-mux/backends/secrets"
	"github.com/mcp-mux/mcp-mux/mux/config"
)

// The sign-in commands: login, logout and secret set/delete. Thin: the
// flow, the stores and the listener are package oauth's and secrets'.
// None of them prints a token, a code or a secret.

func loginCommand(configFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name:      "login",
		Usage:     "sign in to a remote backend's server (OAuth, in your browser); the tokens are kept in your OS's secret store",
		ArgsUsage: "NAME",
		Description: "Opens the server's sign-in page with $BROWSER, or the OS's opener, and always prints its URL on stderr (open it\n" +
			"yourself on a machine without a browser: the sign-in comes back to a listener on 127.0.0.1 of this machine).\n" +
			"A running mcp-mux picks the sign-in up within a second, without a restart.",
		Flags: []cli.Flag{
			configFlag,
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "give up if the sign-in has not finished within `DURATION`"},
			&cli.BoolFlag{Name: "no-browser", Usage: "print the URL only; open no browser"},
		},
		Action: loginAction,
	}
}

func logoutCommand(configFlag cli.Flag) *cli.Command {
	return &cli.Command{
		Name:      "logout",
		Usage:     "remove a remote backend's sign-in (its tokens) from this machine",
		ArgsUsage: "NAME",
		Flags:     []cli.Flag{configFlag},
		Action:    logoutAction,
	}
}

func secretCommand() *cli.Command {
	return &cli.Command{
		Name:  "secret",
		Usage: "keep a secret in your OS's secret store, for ${secret:NAME} in env and headers values",
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "store a secret: its value is read from stdin, or asked for on the terminal (never from the command line)",
				ArgsUsage: "NAME",
				Action:    secretSetAction,
			},
			{
				Name:      "delete",
				Usage:     "remove a stored secret",
				ArgsUsage: "NAME",
				Action:    secretDeleteAction,
			},
		},
	}
}

// oneName is the command's single NAME argument.
func oneName(c *cli.Context) (string, error) {
	where := "mcp-mux " + c.Command.FullName()
	if c.NArg() != 1 {
		return "", cli.Exit(fmt.Sprintf("%s: takes one NAME, got %d arguments\nRun '%s --help' for usage.", where, c.NArg(), where), 1)
	}
	return c.Args().First(), nil
}

// remoteBackend finds the [[backend]] name of the config, which must be a
// remote one that can sign in. Mistakes in other backends do not matter.
func remoteBackend(c *cli.Context, name string) (*config.Backend, error) {
	path, err := config.Find(givenConfig(c), os.Getenv)
	if err != nil {
		return nil, cli.Exit("mcp-mux: "+err.Error(), 1)
	}
	cfg, err := config.LoadForServing(path)
	if err != nil {
		return nil, cli.Exit(err.Error(), 1)
	}
	var names []string
	for i := range cfg.Backends {
		b := &cfg.Backends[i]
		names = append(names, b.Name)
		if b.Name != name {
			continue
		}
		switch {
		case b.Broken != "":
			return nil, cli.Exit(fmt.Sprintf("mcp-mux: backend %s has mistakes in %s; fix them first:\n%s", name, path, b.Broken), 1)
		case b.URL == "":
			return nil, cli.Exit(fmt.Sprintf("mcp-mux: backend %s runs a command: only a remote backend (url = ...) signs in", name), 1)
		}
		for k := range b.Headers {
			if http.CanonicalHeaderKey(k) == "Authorization" {
				return nil, cli.Exit(fmt.Sprintf("mcp-mux: backend %s sends its own Authorization header (%s): remove it to sign in with OAuth", name, path), 1)
			}
		}
		return b, nil
	}
	msg := fmt.Sprintf("mcp-mux: no backend %q in %s", name, path)
	if len(names) > 0 {
		msg += " (its backends: " + strings.Join(names, ", ") + ")"
	}
	return nil, cli.Exit(msg, 1)
}

func loginAction(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	b, err := remoteBackend(c, name)
	if err != nil {
		return err
	}
	s, err := oauth.Open()
	if err != nil {
		return cli.Exit("mcp-mux login: "+err.Error(), 1)
	}
	open := oauth.OpenBrowser
	if c.Bool("no-browser") {
		open = func(string) error { return errors.New("--no-browser") }
	}
	// Ctrl-C ends the wait for the browser, and the listener with it.
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	spec := b.Spec()
	rec, err := oauth.Login(ctx, s, oauth.LoginOptions{
		Name: name, ServerURL: spec.URL, Headers: spec.Headers,
		ClientID: spec.OAuth.ClientID, ClientSecret: spec.OAuth.ClientSecret, ClientMetadataURL: spec.OAuth.ClientMetadataURL,
		Scopes: spec.OAuth.Scopes, CallbackPort: spec.OAuth.CallbackPort,
		Timeout: c.Duration("timeout"), Say: func(msg string) { fmt.Fprint(os.Stderr, msg) }, Open: open, Version: version,
	})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return cli.Exit("mcp-mux login: interrupted; not signed in", 130)
		}
		return cli.Exit("mcp-mux login: "+err.Error(), 1)
	}
	by := ""
	if rec.Issuer != "" {
		by = " by " + rec.Issuer
	}
	fmt.Fprintf(os.Stderr, "The sign-in (issued%s, client registration: %s) is kept in %s; a running mcp-mux connects %s within a second.\n",
		by, rec.Registration, s.Where(spec.URL), name)
	fmt.Fprintf(os.Stdout, "signed in to %s\n", name)
	return nil
}

func logoutAction(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	b, err := remoteBackend(c, name)
	if err != nil {
		return err
	}
	s, err := oauth.Open()
	if err != nil {
		return cli.Exit("mcp-mux logout: "+err.Error(), 1)
	}
	where := s.Where(b.URL)
	found, err := s.Delete(b.URL)
	if err != nil {
		return cli.Exit("mcp-mux logout: "+err.Error(), 1)
	}
	if !found {
		fmt.Fprintf(os.Stdout, "%s was not signed in\n", name)
		return nil
	}
	fmt.Fprintf(os.Stdout, "signed out of %s (its tokens are removed from %s)\n", name, where)
	return nil
}

// maxSecret bounds a secret read from stdin.
const maxSecret = 64 << 10

func secretSetAction(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	if !secrets.ValidName(name) {
		return cli.Exit(fmt.Sprintf("mcp-mux secret set: invalid name %q: use letters, digits, \"_\", \"-\" and \".\"", name), 1)
	}
	var value []byte
	if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
		fmt.Fprintf(os.Stderr, "Value of secret %s (not shown as you type): ", name)
		value, err = term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
	} else {
		value, err = io.ReadAll(io.LimitReader(os.Stdin, maxSecret+1))
		if len(value) > maxSecret {
			return cli.Exit(fmt.Sprintf("mcp-mux secret set: the value on stdin is over %d KiB", maxSecret>>10), 1)
		}
		// What echo and a here-string add.
		value = bytes.TrimSuffix(bytes.TrimSuffix(value, []byte("\n")), []byte("\r"))
	}
	if err != nil {
		return cli.Exit("mcp-mux secret set: reading the value: "+err.Error(), 1)
	}
	if len(value) == 0 {
		return cli.Exit("mcp-mux secret set: the value is empty: nothing stored", 1)
	}
	if slices.Contains(value, 0) {
		return cli.Exit("mcp-mux secret set: the value contains a NUL character", 1)
	}
	where, err := secrets.Set(name, string(value))
	if err != nil {
		return cli.Exit("mcp-mux secret set: "+err.Error(), 1)
	}
	fmt.Fprintf(os.Stdout, "stored secret %s in %s; write ${secret:%s} in an env or headers value to use it\n", name, where, name)
	return nil
}

func secretDeleteAction(c *cli.Context) error {
	name, err := oneName(c)
	if err != nil {
		return err
	}
	if err := secrets.Delete(name); errors.Is(err, secrets.ErrNotFound) {
		fmt.Fprintf(os.Stdout, "no secret %s was stored\n", name)
		return nil
	} else if err != nil {
		return cli.Exit("mcp-mux secret delete: "+err.Error(), 1)
	}
	fmt.Fprintf(os.Stdout, "deleted secret %s\n", name)
	return nil
}
