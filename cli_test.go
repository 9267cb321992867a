package main

import (
	"runtime/debug"
	"testing"
)

// What the command line does as a user types it is tested on the built
// binary, in mux/e2e; here, what needs the package's own code.

func TestFormatVersion(t *testing.T) {
	vcs := func(rev, time, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: time}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "fd87d45a26a46d5718783ef739038ab64e05d4b0"
	cases := []struct {
		name   string
		ldflag string
		info   *debug.BuildInfo
		want   string
	}{
		{"go install of a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0"},
		{"go install of a commit", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261122131534-fd87d45a26a4"}}, "v0.0.0-20261122131534-fd87d45a26a4"},
		{"checkout build, no tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261122131534-fd87d45a26a4"}, Settings: vcs(rev, "2026-11-22T13:15:34Z", "false")},
			"devel fd87d45a26a4 (2026-11-22T13:15:34Z)"},
		{"checkout build, edited", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261122131534-fd87d45a26a4+dirty"}, Settings: vcs(rev, "2026-11-22T13:15:34Z", "true")},
			"devel fd87d45a26a4-dirty (2026-11-22T13:15:34Z)"},
		{"checkout build, devel", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "", "true")}, "devel fd87d45a26a4-dirty"},
		{"checkout build at a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: vcs(rev, "2026-11-22T13:15:34Z", "false")},
			"v1.2.0 (fd87d45a26a4, 2026-11-22T13:15:34Z)"},
		{"no vcs, no version", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"no build info", "", nil, "devel"},
		{"ldflags win", "1.0.0-rc1", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: vcs(rev, "", "true")}, "1.0.0-rc1"},
	}
	for _, c := range cases {
		if got := formatVersion(c.ldflag, c.info); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
