package main

import (
	"strings"
	"testing"
)

func TestMergedMetricsNameEachFamilyOnceAndLabelEverySample(t *testing.T) {
	a := "# HELP x_total X.\n# TYPE x_total counter\nx_total{b=\"1\"} 2\n# HELP y Y.\n# TYPE y gauge\ny 1\n"
	b := "# HELP x_total X.\n# TYPE x_total counter\nx_total{} 5\n"
	var out strings.Builder
	mergeMetrics(&out, []labelled{{"c1", []byte(a)}, {"c2", []byte(b)}})
	want := "# HELP x_total X.\n# TYPE x_total counter\nx_total{class=\"c1\",b=\"1\"} 2\nx_total{class=\"c2\"} 5\n" +
		"# HELP y Y.\n# TYPE y gauge\ny{class=\"c1\"} 1\n"
	if out.String() != want {
		t.Errorf("merged:\n%s\nwant:\n%s", out.String(), want)
	}
}
