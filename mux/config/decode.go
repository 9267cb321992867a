package config

import (
	"encoding"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/backends"
)

// Decoding: copying the TOML library's plain maps into the Config structs
// key by key, so that every unknown key and every value of the wrong type is
// reported, with a description of what was wanted and a guess at the key that
// was meant.

var (
	backendNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	prefixRe      = regexp.MustCompile(`^[A-Za-z0-9_-]*$`)
	bareKeyRe     = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	envVarNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	backendSegRe  = regexp.MustCompile(`^backend\[([0-9]+)\]$`)

	durationType        = reflect.TypeOf(Duration{})
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	timeType            = reflect.TypeOf(time.Time{})
)

func isArrayOfTables(v any) bool {
	switch v := v.(type) {
	case []map[string]any:
		return true
	case []any:
		for _, e := range v {
			if _, ok := e.(map[string]any); !ok {
				return false
			}
		}
		return len(v) > 0
	}
	return false
}

// sortedKeys returns the keys of m in file order (by line, then by name).
func (p *parser) sortedKeys(base keyPath, m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	line := func(k string) int {
		l := p.lines[base.child(k).String()]
		if l == 0 {
			return int(^uint(0) >> 1)
		}
		return l
	}
	sort.Slice(keys, func(i, j int) bool {
		li, lj := line(keys[i]), line(keys[j])
		if li != lj {
			return li < lj
		}
		return keys[i] < keys[j]
	})
	return keys
}

type backendEntry struct {
	path    keyPath // backend[i]
	spec    Backend
	present map[string]bool
}

func (p *parser) decodeBackends(kp keyPath, v any) []backendEntry {
	elems := p.arrayOfTables(kp, v, "backend", p.addEarly)
	var out []backendEntry
	for i, e := range elems {
		bp := kp.index(i)
		tbl, ok := e.(map[string]any)
		if !ok {
			p.add(bp, "expected a table, got %s", kindOf(e))
			continue
		}
		var b backendEntry
		b.path = bp
		p.decodeInheritEnv(bp, tbl)
		b.present = p.decodeStruct(bp, tbl, reflect.ValueOf(&b.spec).Elem(), backendHint)
		if backendNameRe.MatchString(b.spec.Name) {
			p.names[i] = b.spec.Name
		}
		out = append(out, b)
	}
	return out
}

// arrayOfTables is v, the value of the [[name]] sections at kp, as its
// elements; nil, with the mistake said, when it is not an array. A single
// [name] table is said unless said (its own report) is true.
func (p *parser) arrayOfTables(kp keyPath, v any, name string, said func() bool) []any {
	switch v := v.(type) {
	case []map[string]any:
		elems := make([]any, 0, len(v))
		for _, e := range v {
			elems = append(elems, e)
		}
		return elems
	case []any:
		return v
	case map[string]any:
		if said == nil || !said() {
			p.add(kp, "must be an array of tables: write [[%s]] (double brackets) for each %s, not [%s]", name, name, name)
		}
		return nil
	default:
		p.add(kp, "expected [[%s]] sections (an array of tables), got %s", name, kindOf(v))
		return nil
	}
}

// decodeInheritEnv rewrites inherit_env = true (all of mux's environment)
// as ["*"] and false as absent, and reports a value that is neither a
// boolean nor a list, and list entries that cannot be variable names (names
// only, so they may be shown). Entries of the wrong type are left to
// decodeStruct.
func (p *parser) decodeInheritEnv(bp keyPath, tbl map[string]any) {
	v, ok := tbl["inherit_env"]
	if !ok {
		return
	}
	kp := bp.child("inherit_env")
	switch v := v.(type) {
	case bool:
		if v {
			tbl["inherit_env"] = []any{"*"}
		} else {
			delete(tbl, "inherit_env")
		}
	case []any:
		for i, e := range v {
			if name, ok := e.(string); ok && !backends.ValidInheritPattern(name) {
				p.add(kp.index(i), "invalid variable name %q: use a name, a prefix ending in \"*\" (\"AWS_*\"), or \"*\" for all", name)
			}
		}
	default:
		p.add(kp, `expected true, false or a list of variable names, such as ["GITHUB_TOKEN", "AWS_*"], got %s`, kindOf(v))
		delete(tbl, "inherit_env")
	}
}

// Hints for keys that exist, but in another section.
func topHint(key string) string {
	if _, ok := tomlFields(reflect.TypeOf(Settings{}))[key]; ok {
		return fmt.Sprintf("%q belongs in the [mux] section", key)
	}
	if _, ok := tomlFields(reflect.TypeOf(Backend{}))[key]; ok {
		return fmt.Sprintf("%q belongs in a [[backend]] section (for a table such as env, write [backend.%s] after the [[backend]] header)", key, key)
	}
	return ""
}

func muxHint(key string) string {
	if _, ok := tomlFields(reflect.TypeOf(Backend{}))[key]; ok {
		return fmt.Sprintf("%q is a [[backend]] key, not a [mux] key", key)
	}
	return ""
}

func backendHint(key string) string {
	if _, ok := tomlFields(reflect.TypeOf(Settings{}))[key]; ok {
		return fmt.Sprintf("%q is a [mux] key, not a [[backend]] key", key)
	}
	return ""
}

func (p *parser) unknownKey(kp keyPath, key string, known []string, hint func(string) string) {
	msg := "unknown key"
	if s := Closest(key, known); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if h := hint(key); h != "" {
		msg += "; " + h
	}
	p.add(kp, "%s", msg)
}

// tomlFields maps the toml tag names of a struct type to field indexes.
func tomlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = i
	}
	return out
}

// fieldNames returns the toml names of t's fields in declaration order.
func fieldNames(t reflect.Type) []string {
	m := tomlFields(t)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]] < m[names[j]] })
	return names
}

// decodeStruct copies tbl into the struct dst, reporting unknown keys and
// values of the wrong type. It returns the known keys present in tbl, mapped
// to whether their value was valid (invalid ones are reported already and
// should not be checked further).
func (p *parser) decodeStruct(kp keyPath, tbl map[string]any, dst reflect.Value, hint func(string) string) map[string]bool {
	fields := tomlFields(dst.Type())
	present := map[string]bool{}
	for _, k := range p.sortedKeys(kp, tbl) {
		ck := kp.child(k)
		i, ok := fields[k]
		if !ok {
			p.unknownKey(ck, k, fieldNames(dst.Type()), hint)
			continue
		}
		present[k] = p.assign(ck, tbl[k], dst.Field(i))
	}
	return present
}

// assign stores the raw TOML value v into dst, or reports why it cannot.
func (p *parser) assign(kp keyPath, v any, dst reflect.Value) bool {
	t := dst.Type()
	mismatch := func() bool {
		msg := fmt.Sprintf("expected %s, got %s", describe(t), kindOf(v))
		if t.Kind() == reflect.String {
			switch v.(type) {
			case int64, float64, bool:
				msg += " (put the value in double quotes)"
			}
		}
		p.add(kp, "%s", msg)
		return false
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		if err := dst.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			p.add(kp, "%s", err.Error())
			return false
		}
		return true
	}
	switch t.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return mismatch()
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return mismatch()
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			return mismatch()
		}
		if dst.OverflowInt(n) {
			p.add(kp, "number %d is out of range", n)
			return false
		}
		dst.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(int64)
		if !ok {
			return mismatch()
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			p.add(kp, "number %d is out of range", n)
			return false
		}
		dst.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		switch f := v.(type) {
		case float64:
			dst.SetFloat(f)
		case int64:
			dst.SetFloat(float64(f))
		default:
			return mismatch()
		}
	case reflect.Pointer:
		nv := reflect.New(t.Elem())
		if !p.assign(kp, v, nv.Elem()) {
			return false
		}
		dst.Set(nv)
	case reflect.Slice:
		rv := reflect.ValueOf(v)
		if v == nil || rv.Kind() != reflect.Slice {
			return mismatch()
		}
		out := reflect.MakeSlice(t, rv.Len(), rv.Len())
		ok := true
		for i := 0; i < rv.Len(); i++ {
			if !p.assign(kp.index(i), rv.Index(i).Interface(), out.Index(i)) {
				ok = false
			}
		}
		dst.Set(out)
		return ok
	case reflect.Map:
		m, isMap := v.(map[string]any)
		if !isMap || t.Key().Kind() != reflect.String {
			return mismatch()
		}
		out := reflect.MakeMapWithSize(t, len(m))
		ok := true
		for _, k := range p.sortedKeys(kp, m) {
			ev := reflect.New(t.Elem()).Elem()
			if !p.assign(kp.child(k), m[k], ev) {
				ok = false
				continue
			}
			out.SetMapIndex(reflect.ValueOf(k).Convert(t.Key()), ev)
		}
		dst.Set(out)
		return ok
	case reflect.Struct:
		if t == timeType {
			tv, ok := v.(time.Time)
			if !ok {
				return mismatch()
			}
			dst.Set(reflect.ValueOf(tv))
			return true
		}
		m, ok := v.(map[string]any)
		if !ok {
			return mismatch()
		}
		n := len(p.problems)
		p.decodeStruct(kp, m, dst, func(string) string { return "" })
		return len(p.problems) == n
	case reflect.Interface:
		if v != nil && reflect.TypeOf(v).AssignableTo(t) {
			dst.Set(reflect.ValueOf(v))
			return true
		}
		return mismatch()
	default:
		p.add(kp, "cannot be set from the config file")
		return false
	}
	return true
}

// describe says what kind of TOML value a Go type wants.
func describe(t reflect.Type) string {
	if t == durationType {
		return `a duration in double quotes, such as "30s" or "2m"`
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return describe(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return `a list of strings, such as ["a", "b"]`
		}
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return `a table of strings, such as { KEY = "value" }`
		}
		return "a table"
	case reflect.Struct:
		if t == timeType {
			return "a date-time"
		}
		return "a table"
	}
	return "a value"
}

// kindOf names the TOML type of a decoded value (never its content).
func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case nil:
		return "nothing"
	}
	return "a value of another type"
}

// Closest returns the candidate nearest to key if its edit distance is at
// most 2 (and smaller than the key itself), else "": the name a "did you
// mean" suggests.
func Closest(key string, candidates []string) string {
	best, bestD := "", 3
	lk := strings.ToLower(key)
	for _, c := range candidates {
		d := editDistance(lk, strings.ToLower(c))
		if d < bestD && d < len(key) {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 99
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// IsEnvVarName reports whether name can be a variable of ${NAME}.
func IsEnvVarName(name string) bool { return envVarNameRe.MatchString(name) }

// IsBareKey reports whether k can be written as a bare TOML key.
func IsBareKey(k string) bool { return bareKeyRe.MatchString(k) }
