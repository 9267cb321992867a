#!/bin/sh
# Installs the 20 MCP servers of the tool-search measurement (issue 23) at
# the versions of package-lock.json, with no browser download, and writes
# catalog.json from what they list through mcp-mux (capture/main.go; the
# config is mcp-mux.toml beside this file, committed with relative paths).
#
#   testdata/toolsearch/setup.sh            install, then rewrite catalog.json
#   testdata/toolsearch/setup.sh -check     install, then fail if catalog.json differs
#
# Needs Node.js 20 or later, npm and Go; takes a few minutes and about 800 MB.
# Never run in CI: the evaluation and benchmarks read the committed catalog.
set -eu
cd "$(dirname "$0")"
# Install scripts are off: they would download browsers (puppeteer,
# @playwright/browser-*), and no server needs one to start and list its
# tools. The variables keep them off for an npm that runs them anyway.
PUPPETEER_SKIP_DOWNLOAD=1 PUPPETEER_SKIP_CHROMIUM_DOWNLOAD=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
	npm ci --ignore-scripts --no-audit --no-fund
cd ../..
go run ./testdata/toolsearch/capture "$@"
