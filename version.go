package main

import (
	"regexp"
	"runtime/debug"
)

// version may be set at build time with -ldflags "-X main.version=…"; it
// then wins over what the build info says (see formatVersion).
var version string

// pseudoVersion matches the revision part of a Go pseudo-version
// (v0.0.0-20261122131534-fd87d45a26a4), which the go command gives a build
// from a checkout that is not at a tag.
var pseudoVersion = regexp.MustCompile(`-(0\.)?\d{14}-[0-9a-f]{12}(\+dirty)?$`)

// formatVersion is what `mcp-mux version`, --version and the serverInfo
// given to agents say. A release installed with `go install …@vX.Y.Z`
// carries its tag as the main module's version; a build from a checkout
// carries the commit in its VCS stamp, which names it better than a
// pseudo-version does (and says whether the tree had edits).
func formatVersion(ldflag string, info *debug.BuildInfo) string {
	if ldflag != "" {
		return ldflag
	}
	if info == nil {
		return "devel"
	}
	var rev, when string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	v := info.Main.Version
	if v == "(devel)" {
		v = ""
	}
	if rev == "" {
		if v == "" {
			return "devel"
		}
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	if v != "" && !pseudoVersion.MatchString(v) {
		// A checkout at a tag: the tag, and the commit to be sure.
		if when != "" {
			rev += ", " + when
		}
		return v + " (" + rev + ")"
	}
	if when != "" {
		return "devel " + rev + " (" + when + ")"
	}
	return "devel " + rev
}

// buildVersion is this binary's version, as formatVersion tells it.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return formatVersion(version, info)
}
