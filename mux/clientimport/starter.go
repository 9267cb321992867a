package clientimport

import (
	"fmt"
	"os/exec"
	"strings"
)

// The starter config `mcp-mux init` writes: the reference comments of
// mcp-mux.toml.example for [mux] (every key commented out, at its default)
// and [[backend]], and one backend that runs.
//
// A config needs at least one enabled backend (check refuses none), so the
// starter's backend is a real, harmless server that the machine can run:
// the reference time server with uvx, else the reference sequential
// thinking server with npx. With neither on PATH it is the npx one, and
// check says that npx is missing until Node.js is installed or the backend
// is replaced.

// Starter is the backend a starter config runs.
type Starter struct {
	Name, Command string
	Args          []string
	About         string
}

var starterBackends = []Starter{
	{Name: "time", Command: "uvx", Args: []string{"mcp-server-time"},
		About: "The reference MCP time server (tools: get_current_time, convert_time), run with uv's uvx."},
	{Name: "thinking", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-sequential-thinking"},
		About: "The reference MCP sequential thinking server (one tool: sequentialthinking), run with Node.js's npx."},
}

// ChooseStarter picks the starter's backend by what lookPath finds
// (nil means exec.LookPath); found is false when no runner was found.
func ChooseStarter(lookPath func(string) (string, error)) (b Starter, found bool) {
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	for _, b := range starterBackends {
		if _, err := lookPath(b.Command); err == nil {
			return b, true
		}
	}
	return starterBackends[len(starterBackends)-1], false
}

// StarterConfig is the text of the starter config running b.
func StarterConfig(b Starter) []byte {
	args := tomlArray(b.Args)
	return []byte(fmt.Sprintf(starterTemplate, b.About, tomlString(b.Name), tomlString(b.Command), args))
}

var starterTemplate = strings.TrimLeft(`
# mcp-mux configuration, written by `+"`mcp-mux init`"+`.
#
# mcp-mux is started by your MCP client (a desktop agent) as one stdio MCP
# server. It starts each [[backend]] below as a child process and serves all
# their tools, prompts and resources as one server.
#
# Next steps:
#   - Already have MCP servers in Claude Desktop, Claude Code, Cursor or
#     VS Code? `+"`mcp-mux import --output FILE`"+` converts their configs.
#   - Add your servers as [[backend]] sections (see the commented one at the
#     end), then run `+"`mcp-mux check`"+` (with --connect it also starts them).
#   - Register mcp-mux alone in your agent, with "-c" and this file.
#
# While mcp-mux serves, saving this file applies the change without ending
# the agent's session (only the backends that changed restart).
#
# Durations are strings such as "500ms", "30s", "2m". Every [mux] key below
# is commented out at its default; uncomment one to change it.

[mux]
# Name reported to the client as serverInfo.name.
# name = "mcp-mux"

# The instructions the agent gets in initialize. Default "": one sentence
# from mcp-mux about the prefixes, then each backend's own instructions.
# instructions = ""

# Log verbosity: "debug", "info", "warn" or "error".
# log_level = "info"

# Log file; "" (the default) logs to stderr, which MCP clients usually keep.
# A relative path is relative to the directory of this file. Never stdout
# (it carries the protocol).
# log_file = ""

# How long a request forwarded to a backend may take before it fails.
# request_timeout = "60s"

# How long a backend may take to start and answer `+"`initialize`"+` (an npx
# or uvx backend downloads its package on its first start).
# startup_timeout = "30s"

# How long the agent's first list waits for backends still starting; it then
# gets what is ready, and list_changed as each late backend becomes ready.
# first_list_wait = "3s"

# Hard cap for a request whose deadline is extended by progress
# notifications. Must not be shorter than request_timeout.
# max_request_time = "10m"

# Resource subscriptions allowed per client session.
# max_subscriptions = 1000

# Put between a backend's prefix and its tool or prompt names:
# backend "github", tool "search" -> "github__search".
# tool_separator = "__"

# Largest JSON-RPC message accepted, in bytes (16 MiB). At least 1024.
# max_message_size = 16777216

# After closing a backend's stdin on shutdown, how long it gets to exit
# before it is sent SIGTERM.
# shutdown_grace = "2s"

# A backend that crashes restart_max times within restart_window is marked
# failed and is no longer restarted.
# restart_max = 5
# restart_window = "60s"


# Each [[backend]] is one MCP server, run as a child process with stdio.
# Their order is their precedence: when two backends expose the same name,
# the first one wins.

# %s
# Replace it with your own servers (at least one must be enabled).
[[backend]]
name = %s
command = %s
args = %s

# A [[backend]] with every key, commented out:
#
# [[backend]]
# # Required. Unique; letters, digits, "_" and "-". Also the default prefix
# # of its tools and prompts.
# name = "github"
#
# # Required. The program to run -- executed directly, never through a
# # shell, so its arguments go in args. A bare name is looked up on PATH; a
# # path with "/" is relative to the directory of this file (or to cwd when
# # it is set). A leading ~/ is your home directory; ${VAR} is expanded.
# command = "npx"
#
# # Arguments, one string per argument (no shell quoting or globbing).
# args = ["-y", "@modelcontextprotocol/server-github"]
#
# # Environment of this backend, besides a minimal set of mcp-mux's own
# # (PATH, HOME, USER, the locale, ...). ${VAR} is taken from mcp-mux's
# # environment (must be set), ${VAR:-default} has a default, $$ is a "$".
# # Values are never logged. Keep tokens out of this file with ${VAR}, and
# # set VAR in the "env" of mcp-mux's entry in the agent's config.
# env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_TOKEN}" }
#
# # More of mcp-mux's environment for this backend: names ("*" ends a
# # prefix), or true for all of it.
# inherit_env = ["HTTPS_PROXY", "NO_PROXY"]
#
# # Working directory of the child; default: mcp-mux's own. Relative to the
# # directory of this file.
# cwd = "/path/to/project"
#
# # Put before its tool and prompt names, followed by tool_separator.
# # Default: the backend's name. "" exposes names unprefixed.
# prefix = "gh"
#
# # Expose only some of its tools or prompts: globs on its own names
# # (before the prefix); tools = allow list, exclude_tools = deny list.
# tools = ["search_*", "get_*"]
# exclude_tools = ["*_delete"]
# prompts = ["*"]
# exclude_prompts = ["draft_*"]
#
# # Re-read each subscribed resource on this interval, for backends that do
# # not send resources/updated themselves. Default "0s": never.
# poll_interval = "0s"
#
# # "on-failure" (default): restart it when it exits unexpectedly.
# # "never": leave it stopped.
# restart = "on-failure"
#
# # Overrides [mux] request_timeout for this backend; "0s" = inherit.
# request_timeout = "0s"
#
# # Protocol era: absent pins the handshake era, which every stdio server
# # speaks; "auto" probes for the current one first.
# # protocol = "auto"
#
# # true keeps the backend in the file but does not start it.
# disabled = false
`, "\n")
