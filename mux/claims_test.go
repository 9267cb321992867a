package mux

import (
	"testing"

	"github.com/yosida95/uritemplate/v3"
)

// A read of a resource of a template is routed by matching the template,
// which parses the URI afresh each time: an agent reads the same few URIs
// again and again, and the match was a tenth of mcp-mux's CPU per read of
// server-everything's templated resource. A backend's answer for a URI is
// kept for as long as its templates are the same.
func TestATemplatedURIIsMatchedOnceWhileTheTemplatesStay(t *testing.T) {
	const tmpl = "demo://resource/dynamic/text/{resourceId}"
	ut, err := uritemplate.New(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	mem := &member{cat: memberCatalog{compiled: []uriTemplate{compileTemplate(ut, tmpl)}}}
	const uri = "demo://resource/dynamic/text/1"
	if !mem.claims(uri) || mem.claims("demo://resource/static/1") {
		t.Fatal("the template does not route as it should")
	}
	if allocs := testing.AllocsPerRun(100, func() { mem.claims(uri) }); allocs != 0 {
		t.Errorf("claims of a URI it matched before: %.0f allocations per call, want 0 (the template matched again)", allocs)
	}

	// Other templates: the answer is theirs, not the old one.
	other := "other://{x}"
	ot, err := uritemplate.New(other)
	if err != nil {
		t.Fatal(err)
	}
	mem.mu.Lock()
	mem.cat = memberCatalog{compiled: []uriTemplate{compileTemplate(ot, other)}}
	mem.mu.Unlock()
	if mem.claims(uri) {
		t.Error("after its templates changed, the backend still claims a URI only the old ones matched")
	}
}
