package testkit

import (
	"sync"
	"testing"

	"golang.org/x/sys/windows"
)

// underWine reports whether this Windows program runs under Wine, whose
// ntdll has wine_get_version (Windows' has not).
var underWine = sync.OnceValue(func() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
})

// UnderWine reports whether the tests run under Wine, for what differs
// there without being a limit (Wine's WINE* variables in every process's
// environment, say). A test that cannot pass there uses SkipUnderWine.
func UnderWine() bool { return underWine() }

// SkipUnderWine skips t when it runs under Wine (testdata/wine/run.sh),
// for why: what of Windows that Wine does not do as Windows does. Every
// such skip is listed in the README (Windows and macOS).
func SkipUnderWine(t testing.TB, why string) {
	t.Helper()
	if underWine() {
		t.Skip("Wine: " + why)
	}
}
