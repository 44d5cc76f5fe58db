package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// loader applies YAML nodes, from a file or from key=value arguments, to a
// config struct and collects every error instead of stopping at the first,
// so one run shows the user all that is wrong.
type loader struct {
	root reflect.Type // for suggestions
	file string       // the file being applied; "" for arguments
	errs []error

	// Aliases make a small YAML text a large tree (an "alias bomb") or
	// a cycle (&a {<<: *a}); yaml.v3 guards its own decoding against
	// both, and so does this walk.
	inMapping map[*yaml.Node]bool // mappings being applied, to catch cycles
	visits    int                 // nodes applied so far
	exhausted bool                // visits passed maxVisits; stop
}

// visit counts one node applied and reports whether to go on.
func (l *loader) visit(n *yaml.Node, key string) bool {
	if l.visits++; l.visits <= maxVisits {
		return true
	}
	if !l.exhausted {
		l.exhausted = true
		l.fail(n, key, "aliases expand to over %d values; stopped", maxVisits)
	}
	return false
}

// maxVisits bounds the nodes one Load applies, far above any real config.
const maxVisits = 1 << 16

func (l *loader) fail(n *yaml.Node, key, format string, args ...any) {
	e := &Error{File: l.file, Key: key, Msg: fmt.Sprintf(format, args...)}
	if l.file != "" && n != nil {
		e.Line = n.Line
	}
	l.errs = append(l.errs, e)
}

// resolveAlias follows YAML aliases (*name) to the anchored node.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func isPlain(n *yaml.Node) bool {
	return n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "an empty document"
}

// apply sets v, found at key, from node n.
func (l *loader) apply(n *yaml.Node, v reflect.Value, key string) {
	n = resolveAlias(n)
	if !l.visit(n, key) {
		return
	}
	switch mustShape(v.Type()) {
	case scalarShape:
		if n.Kind != yaml.ScalarNode {
			l.fail(n, key, "%s is not %s", describe(n), article(typeName(v.Type())))
			return
		}
		if isNull(n) && v.Kind() != reflect.String && !isText(v.Type()) {
			l.fail(n, key, "no value given; want %s", article(typeName(v.Type())))
			return
		}
		text := n.Value
		if isNull(n) {
			text = ""
		}
		if msg := setScalar(v, text); msg != "" {
			l.fail(n, key, "%s", msg)
		}
	case listShape:
		l.applyList(n, v, key)
	case sectionShape:
		switch {
		case isNull(n):
			// An empty section ("actor:") changes nothing.
		case n.Kind == yaml.MappingNode:
			l.mapping(n, v, key)
		default:
			l.fail(n, key, "%s is a section, not a value; set its keys (%s)", key, exampleKeys(v.Type(), key))
		}
	case optionalShape:
		switch {
		case isNull(n):
			v.SetZero()
		case n.Kind == yaml.MappingNode:
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			l.mapping(n, v.Elem(), key)
		default:
			l.fail(n, key, "%s is an optional section, not a value; set its keys (%s) or null", key, exampleKeys(v.Type().Elem(), key))
		}
	}
}

func exampleKeys(t reflect.Type, key string) string {
	var ks []string
	for _, f := range fields(t) {
		ks = append(ks, joinKey(key, f.key)+"=...")
		if len(ks) == 2 {
			break
		}
	}
	if len(ks) == 0 {
		return "it has none"
	}
	return strings.Join(ks, ", ")
}

// applyList sets a slice: a YAML sequence ([a, b] or a block list), a
// single value (one element), or null/empty (nil). An unquoted single value
// with a comma is refused: "a,b" looks like a list but YAML reads it as one
// string, and guessing either way loses someone's data.
func (l *loader) applyList(n *yaml.Node, v reflect.Value, key string) {
	var elems []*yaml.Node
	switch {
	case isNull(n):
		v.SetZero()
		return
	case n.Kind == yaml.ScalarNode:
		if isPlain(n) && strings.Contains(n.Value, ",") {
			l.fail(n, key, "%q is one value; write a list as [%s]", n.Value, n.Value)
			return
		}
		elems = []*yaml.Node{n}
	case n.Kind == yaml.SequenceNode:
		elems = n.Content
	default:
		l.fail(n, key, "%s is not a list of %s", describe(n), typeName(v.Type().Elem()))
		return
	}
	if len(elems) == 0 {
		v.SetZero()
		return
	}
	s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
	ok := true
	for i, e := range elems {
		e = resolveAlias(e)
		ek := fmt.Sprintf("%s[%d]", key, i)
		et := v.Type().Elem()
		switch {
		case e.Kind != yaml.ScalarNode:
			l.fail(e, ek, "%s is not %s", describe(e), article(typeName(et)))
			ok = false
		case isNull(e) && et.Kind() != reflect.String && !isText(et):
			l.fail(e, ek, "null is not %s", article(typeName(et)))
			ok = false
		default:
			text := e.Value
			if isNull(e) {
				text = ""
			}
			if msg := setScalar(s.Index(i), text); msg != "" {
				l.fail(e, ek, "%s", msg)
				ok = false
			}
		}
	}
	if ok {
		v.Set(s)
	}
}

// mapping applies the keys of mapping node n to struct v. Merge keys
// (<<: *base) apply first so that the mapping's own keys win, as YAML says.
func (l *loader) mapping(n *yaml.Node, v reflect.Value, key string) {
	if l.inMapping[n] {
		l.fail(n, key, "an alias or merge (<<) includes the mapping it is in")
		return
	}
	if l.inMapping == nil {
		l.inMapping = map[*yaml.Node]bool{}
	}
	l.inMapping[n] = true
	defer delete(l.inMapping, n)
	if !l.visit(n, key) {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], resolveAlias(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			continue
		}
		switch val.Kind {
		case yaml.MappingNode:
			l.mapping(val, v, key)
		case yaml.SequenceNode:
			for _, m := range val.Content {
				if m = resolveAlias(m); m.Kind == yaml.MappingNode {
					l.mapping(m, v, key)
				} else {
					l.fail(m, key, "a merge (<<) takes mappings, not %s", describe(m))
				}
			}
		default:
			l.fail(val, key, "a merge (<<) takes a mapping, not %s", describe(val))
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolveAlias(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			continue
		}
		if k.Kind != yaml.ScalarNode {
			l.fail(k, key, "a key must be a name, not %s", describe(k))
			continue
		}
		child := joinKey(key, k.Value)
		if line, dup := seen[k.Value]; dup {
			if l.file != "" {
				l.fail(k, child, "set twice (first on line %d)", line)
			} else {
				l.fail(k, child, "set twice")
			}
			continue
		}
		seen[k.Value] = k.Line
		f, ok := fieldByKey(v.Type(), k.Value)
		if !ok {
			l.fail(k, child, "%s", unknownKeyMsg(child, l.root, v.Type(), key))
			continue
		}
		l.apply(val, v.FieldByIndex(f.index), child)
	}
}

// setScalar parses text into v and returns "" or what was wrong, naming the
// expected type.
func setScalar(v reflect.Value, text string) string {
	t := v.Type()
	if isText(t) {
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(text)); err != nil {
			return fmt.Sprintf("%q is not %s: %v", text, article(typeName(t)), err)
		}
		return ""
	}
	s := strings.TrimSpace(text)
	if t == durationType {
		// A bare number other than 0 is refused: its unit would be a guess.
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Sprintf("%q is not a duration (like 90s, 5m or 1h30m)", text)
		}
		v.SetInt(int64(d))
		return ""
	}
	switch t.Kind() {
	case reflect.String:
		// Dump could not write it, and no file YAML reads can hold it.
		if !utf8.ValidString(text) {
			return fmt.Sprintf("%q is not valid UTF-8 text", text)
		}
		v.SetString(text)
	case reflect.Bool:
		b, ok := parseBool(s)
		if !ok {
			return fmt.Sprintf("%q is not a bool (true or false)", text)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := strconv.ParseInt(intDigits(s), intBase(s), t.Bits())
		if err != nil {
			return numberError(text, "an int", t, err)
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u, err := strconv.ParseUint(intDigits(s), intBase(s), t.Bits())
		if err != nil {
			return numberError(text, "a non-negative int", t, err)
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		f, err := parseFloat(s, t.Bits())
		if err != nil {
			return numberError(text, "a float", t, err)
		}
		v.SetFloat(f)
	default:
		panic("config: setScalar on " + t.String())
	}
	return ""
}

func numberError(text, want string, t reflect.Type, err error) string {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Sprintf("%q is out of range for %s", text, t.Kind())
	}
	return fmt.Sprintf("%q is not %s", text, want)
}

// intBase reads 0x, 0o and 0b prefixes as YAML 1.2 does, and everything
// else in base 10 (so 010 is ten, not eight).
func intBase(s string) int {
	s = strings.TrimLeft(s, "+-")
	if len(s) > 2 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1])) {
		return 0
	}
	return 10
}

// intDigits drops digit-group underscores (1_000_000) for base 10; base 0
// parsing accepts them itself.
func intDigits(s string) string {
	if intBase(s) == 10 && strings.Contains(s, "_") && !strings.HasPrefix(s, "_") && !strings.HasSuffix(s, "_") {
		return strings.ReplaceAll(s, "_", "")
	}
	return s
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1", "t", "y":
		return true, true
	case "false", "no", "off", "0", "f", "n":
		return false, true
	}
	return false, false
}

// parseFloat accepts Go and YAML spellings of infinity and NaN (.inf, .nan).
func parseFloat(s string, bits int) (float64, error) {
	switch strings.ToLower(s) {
	case ".inf", "+.inf":
		return math.Inf(1), nil
	case "-.inf":
		return math.Inf(-1), nil
	case ".nan":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, bits)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// loadFile applies the YAML file name to v.
func (l *loader) loadFile(name string, v reflect.Value) {
	l.file = name
	defer func() { l.file = "" }()
	data, err := os.ReadFile(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		l.errs = append(l.errs, &Error{File: name, Msg: err.Error(), Err: err})
		return
	}
	applyText(l, data, v)
}

// applyText applies YAML text, read from l.file, to v.
func applyText(l *loader, data []byte, v reflect.Value) {
	name := l.file
	defer func() {
		// yaml.v3 recovers its own failures; anything else escaping it is
		// still the file's fault as far as the user can tell.
		if r := recover(); r != nil {
			l.errs = append(l.errs, &Error{File: name, Msg: fmt.Sprintf("YAML parser failed: %v", r)})
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return // an empty file changes nothing
		}
		l.errs = append(l.errs, yamlError(name, err))
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			l.errs = append(l.errs, yamlError(name, err))
		} else {
			l.fail(&extra, "", "holds more than one YAML document (a second --- starts here)")
		}
		return
	}
	top := resolveAlias(doc.Content[0])
	switch {
	case isNull(top):
	case top.Kind == yaml.MappingNode:
		l.mapping(top, v, "")
	default:
		l.fail(top, "", "the top level must be a mapping of keys, not %s", describe(top))
	}
}

// yamlError turns a yaml.v3 syntax error into an Error with its line.
func yamlError(file string, err error) *Error {
	msg := err.Error()
	e := &Error{File: file, Err: err}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	e.Msg = "bad YAML: " + strings.TrimPrefix(msg, "yaml: ")
	return e
}

// override applies one key=value argument to root.
func (l *loader) override(arg string, root reflect.Value) {
	key, raw, _ := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if key == "" {
		l.errs = append(l.errs, &Error{Msg: fmt.Sprintf("argument %q has no key before '='", arg)})
		return
	}
	v := root
	segs := strings.Split(key, ".")
	for i, seg := range segs {
		at := strings.Join(segs[:i+1], ".")
		f, ok := fieldByKey(v.Type(), seg)
		if !ok {
			l.fail(nil, key, "%s", unknownKeyMsg(key, l.root, v.Type(), strings.Join(segs[:i], ".")))
			return
		}
		fv := v.FieldByIndex(f.index)
		if i == len(segs)-1 {
			n, msg := overrideNode(raw, f.typ)
			if msg != "" {
				l.fail(nil, key, "%s", msg)
				return
			}
			l.apply(n, fv, key)
			return
		}
		switch f.shape {
		case sectionShape:
			v = fv
		case optionalShape:
			if fv.IsNil() {
				fv.Set(reflect.New(f.typ.Elem()))
			}
			v = fv.Elem()
		default:
			l.fail(nil, key, "unknown key; %s is %s, not a section", at, article(typeName(f.typ)))
			return
		}
	}
}

// overrideNode turns the text after '=' into a YAML node for a field of
// type t. Strings are taken verbatim (no YAML surprises: a=b: c, #tag and
// null stay text) unless quoted; lists take YAML flow syntax [a, b];
// sections take flow mappings {k: v}; numbers and bools are plain scalars.
func overrideNode(raw string, t reflect.Type) (*yaml.Node, string) {
	trim := strings.TrimSpace(raw)
	quoted := strings.HasPrefix(trim, `"`) || strings.HasPrefix(trim, `'`)
	sh := mustShape(t)
	isString := sh == scalarShape && (t.Kind() == reflect.String || isText(t))
	switch {
	case isString && !quoted:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: raw}, ""
	case isString && quoted:
		if n, err := parseFlow(raw); err == nil && n.Kind == yaml.ScalarNode {
			return n, ""
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: raw}, ""
	case quoted, sh == sectionShape, sh == optionalShape,
		sh == listShape && (strings.HasPrefix(trim, "[") || strings.HasPrefix(trim, "{")):
		n, err := parseFlow(raw)
		if err != nil {
			return nil, fmt.Sprintf("%q is not valid YAML: %s", raw, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return n, ""
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Value: trim}, ""
}

// parseFlow parses one argument's value as a YAML document; an empty one
// is null.
func parseFlow(raw string) (n *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("YAML parser failed: %v", r)
		}
	}()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}, nil
	}
	return doc.Content[0], nil
}
