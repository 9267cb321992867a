package backends

import (
	"runtime"
	"sort"
	"strings"
)

// defaultInherited names the variables of mux's environment every backend
// gets, as the official SDKs' stdio transports do: enough to find programs,
// the user's home and temp dir, and the locale, but no token a user exported
// for one backend. A trailing "*" matches a prefix.
func defaultInherited() []string {
	if runtime.GOOS == "windows" {
		return []string{
			"APPDATA", "COMSPEC", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PATHEXT",
			"PROCESSOR_ARCHITECTURE", "PROGRAMFILES", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP",
			"USERNAME", "USERPROFILE",
		}
	}
	return []string{
		"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER",
		"LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR",
	}
}

// ChildEnv is the environment a backend starts with: the default variables
// of environ (mux's own, or the session's it serves), those spec.InheritEnv
// names, then spec.Env over them. Later entries replace earlier ones of the
// same name, so there are no duplicates for the child to pick from. It is
// what the child actually gets, so two backends with the same ChildEnv (and
// command, args, cwd) are the same server. Its order is environ's, then
// spec.Env's sorted names: sort it before comparing two environments.
func ChildEnv(spec Spec, environ []string) []string {
	defaults := defaultInherited()
	out := []string{} // never nil: to os/exec, nil means all of mux's environment
	at := map[string]int{}
	set := func(k, v string) {
		key := envKey(k)
		if i, ok := at[key]; ok {
			out[i] = k + "=" + v
			return
		}
		at[key] = len(out)
		out = append(out, k+"="+v)
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch {
		case matchAny(spec.InheritEnv, k):
			set(k, v)
		// A default name holding an exported shell function ("() {") is
		// most likely an attack on the backend's shell, as the SDKs judge.
		case k != "" && matchAny(defaults, k) && !strings.HasPrefix(v, "()"):
			set(k, v)
		}
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		set(k, spec.Env[k])
	}
	return out
}

// envKey is the name variables are compared by: Windows ignores case.
func envKey(name string) string {
	if runtime.GOOS == "windows" {
		return strings.ToUpper(name)
	}
	return name
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(envKey(name), envKey(prefix)) {
				return true
			}
		} else if envKey(name) == envKey(p) {
			return true
		}
	}
	return false
}

// ValidInheritPattern reports whether p can be an inherit_env entry: a
// variable name, or a prefix followed by one "*" ("AWS_*"; "*" alone means
// every variable).
func ValidInheritPattern(p string) bool {
	name, _ := strings.CutSuffix(p, "*")
	if p == "*" {
		return true
	}
	return name != "" && !strings.ContainsAny(name, "=*\x00")
}
