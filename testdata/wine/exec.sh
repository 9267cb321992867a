#!/bin/sh
# go test -exec: runs a Windows test binary under Wine (run.sh sets up Wine).
exec wine64 "$@"
