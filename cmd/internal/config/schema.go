package config

import (
	"encoding"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"
)

// shape is how a Go type appears in the config: a single value, a list of
// values, a section of keys, or an optional section (a pointer to a struct,
// null when unset).
type shape int

const (
	scalarShape shape = iota
	listShape
	sectionShape
	optionalShape
)

var (
	durationType        = reflect.TypeFor[time.Duration]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	textMarshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
)

// isText reports whether t reads and writes itself as text, which makes it
// a scalar whatever its kind (an enum, a dtype name).
func isText(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(textUnmarshalerType) &&
		(t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType))
}

func isScalar(t reflect.Type) bool {
	if t == durationType || isText(t) {
		return true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// shapeOf returns t's shape and false when the package cannot hold t.
func shapeOf(t reflect.Type) (shape, bool) {
	switch {
	case isScalar(t):
		return scalarShape, true
	case t.Kind() == reflect.Slice && isScalar(t.Elem()):
		return listShape, true
	case t.Kind() == reflect.Struct:
		return sectionShape, true
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && !isScalar(t.Elem()):
		return optionalShape, true
	}
	return 0, false
}

func mustShape(t reflect.Type) shape {
	s, ok := shapeOf(t)
	if !ok {
		panic(fmt.Sprintf("config: unsupported type %s", t))
	}
	return s
}

// field is one key of a section.
type field struct {
	key   string       // the YAML name, from the yaml tag or the lowercased Go name
	help  string       // the help tag
	index []int        // for reflect.Value.FieldByIndex; longer than 1 through inlined structs
	typ   reflect.Type // the Go type
	shape shape
}

var fieldCache sync.Map // reflect.Type -> []field

// fields lists the keys of struct type t in declaration order, with
// ",inline" structs flattened into it. A type the package cannot hold, two
// fields with one key, or a type that contains itself is a programmer's
// mistake and panics, so every entry point calls checkSchema first.
func fields(t reflect.Type) []field {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]field)
	}
	var fs []field
	seen := map[string]string{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		inline := hasOption(opts, "inline")
		// An unexported embedded struct may still be inlined: its
		// exported fields are settable through it.
		if tag == "-" || !sf.IsExported() && !(sf.Anonymous && inline) {
			continue
		}
		if inline {
			if sf.Type.Kind() != reflect.Struct || isScalar(sf.Type) {
				panic(fmt.Sprintf("config: %s.%s: only a struct can be inlined", t, sf.Name))
			}
			for _, in := range fields(sf.Type) {
				in.index = append([]int{i}, in.index...)
				addField(t, &fs, seen, in, sf.Name+"."+in.key)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		s, ok := shapeOf(sf.Type)
		if !ok {
			panic(fmt.Sprintf("config: %s.%s: unsupported type %s (want a string, bool, number, duration, list of those, struct or pointer to struct)", t, sf.Name, sf.Type))
		}
		addField(t, &fs, seen, field{key: name, help: sf.Tag.Get("help"), index: []int{i}, typ: sf.Type, shape: s}, sf.Name)
	}
	fieldCache.Store(t, fs)
	return fs
}

func addField(t reflect.Type, fs *[]field, seen map[string]string, f field, goName string) {
	if f.key == "" || strings.ContainsAny(f.key, ".=[] \t") {
		panic(fmt.Sprintf("config: %s.%s: key %q must be a plain name (no dots, '=', brackets or spaces)", t, goName, f.key))
	}
	if prev, dup := seen[f.key]; dup {
		panic(fmt.Sprintf("config: %s: fields %s and %s share the key %q", t, prev, goName, f.key))
	}
	seen[f.key] = goName
	*fs = append(*fs, f)
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

func fieldByKey(t reflect.Type, key string) (field, bool) {
	for _, f := range fields(t) {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

// rootValue returns the struct cfg points to; cfg must be a non-nil pointer
// to a struct (a programmer's mistake otherwise).
func rootValue(cfg any, writable bool) reflect.Value {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		v = v.Elem()
	} else if writable || v.Kind() != reflect.Struct {
		panic(fmt.Sprintf("config: want a non-nil pointer to a struct, got %T", cfg))
	}
	checkSchema(v.Type(), nil)
	return v
}

// checkSchema walks every type reachable from t so that a bad field panics
// at the entry point, not halfway through applying a file.
func checkSchema(t reflect.Type, path []reflect.Type) {
	for _, p := range path {
		if p == t {
			panic(fmt.Sprintf("config: %s contains itself; config types must be finite trees", t))
		}
	}
	path = append(path, t)
	for _, f := range fields(t) {
		switch f.shape {
		case sectionShape:
			checkSchema(f.typ, path)
		case optionalShape:
			checkSchema(f.typ.Elem(), path)
		}
	}
}

// sectionType returns the struct type behind a section or optional section.
func sectionType(f field) reflect.Type {
	if f.shape == optionalShape {
		return f.typ.Elem()
	}
	return f.typ
}

// allKeys lists every dotted key under t, sections included, for suggestions.
func allKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for _, f := range fields(t) {
		k := joinKey(prefix, f.key)
		keys = append(keys, k)
		if f.shape == sectionShape || f.shape == optionalShape {
			keys = append(keys, allKeys(sectionType(f), k)...)
		}
	}
	return keys
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func lastSegment(key string) string {
	return key[strings.LastIndexByte(key, '.')+1:]
}

// suggest returns up to three known keys close to the unknown one: first
// those ending in the same name (lr for actor_rollout_ref.actor.optim.lr),
// then those within a small edit distance (actor.lrr).
func suggest(unknown string, known []string) []string {
	type cand struct {
		key      string
		sameLast bool
		distance int
	}
	var cs []cand
	last := lastSegment(unknown)
	limit := max(2, len(unknown)/4)
	for _, k := range known {
		c := cand{key: k, sameLast: lastSegment(k) == last}
		if len(unknown) <= 256 {
			c.distance = editDistance(unknown, k)
		} else {
			c.distance = limit + 1
		}
		if !c.sameLast && c.distance > limit {
			continue
		}
		cs = append(cs, c)
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].sameLast != cs[j].sameLast {
			return cs[i].sameLast
		}
		return cs[i].distance < cs[j].distance
	})
	var out []string
	for _, c := range cs[:min(3, len(cs))] {
		out = append(out, c.key)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b in bytes (keys
// are ASCII names).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// unknownKeyMsg names the closest known keys, or when none is close, the
// keys the section does have.
func unknownKeyMsg(key string, root reflect.Type, section reflect.Type, sectionKey string) string {
	if s := suggest(key, allKeys(root, "")); len(s) > 0 {
		return "unknown key; did you mean " + orList(s) + "?"
	}
	var names []string
	for _, f := range fields(section) {
		names = append(names, f.key)
	}
	where := "the top level"
	if sectionKey != "" {
		where = sectionKey
	}
	if len(names) > 12 {
		names = append(names[:12], "...")
	}
	return fmt.Sprintf("unknown key; %s has %s", where, strings.Join(names, ", "))
}

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// typeName is the name Help and error messages give a type.
func typeName(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case isText(t):
		return strings.ToLower(t.Name())
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "uint"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Struct, reflect.Pointer:
		return "section"
	}
	return t.String()
}

// article returns "a float", "an int".
func article(name string) string {
	if name != "" && strings.ContainsRune("aeiou", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}
