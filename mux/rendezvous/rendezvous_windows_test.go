package rendezvous

import "testing"

// TestTheDirectoryDoesNotDependOnTheEnvironment: agents launch mcp-mux
// with environments of their own (some pass a few variables only), and
// every launch must meet at one place.
func TestTheDirectoryDoesNotDependOnTheEnvironment(t *testing.T) {
	t.Setenv(DirEnv, "")
	want, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LOCALAPPDATA", "")
	got, err := Dir()
	if err != nil || got != want {
		t.Fatalf("without LOCALAPPDATA: %q, %v; want %q", got, err, want)
	}
}
