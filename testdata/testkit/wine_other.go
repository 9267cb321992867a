//go:build !windows

package testkit

import "testing"

// SkipUnderWine does nothing: only a Windows program runs under Wine.
func SkipUnderWine(testing.TB, string) {}

// UnderWine is false: only a Windows program runs under Wine.
func UnderWine() bool { return false }
