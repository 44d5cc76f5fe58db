package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Chat templates see JSON as Python does after json.loads: objects keep
// their key order, integers stay integers. Objects become gonja's ordered
// exec.Dict, arrays pyList, numbers int (or *big.Int) or float64.

// pyList is a template list with Python indexing: gonja's own misses
// x[-1] on a one-element list (it needs len > -i instead of >=).
type pyList []any

// GetItem implements exec.ItemGetter.
func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// jsonValue decodes one JSON document into template values.
func jsonValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeJSONValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '{':
			dict := exec.Dict{Pairs: []*exec.Pair{}}
			index := map[string]int{}
			for dec.More() {
				keyTok, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key := keyTok.(string)
				val, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				// A repeated key keeps its first position and its last value,
				// as a Python dict built by json.loads does.
				if at, seen := index[key]; seen {
					dict.Pairs[at].Value = exec.AsValue(val)
					continue
				}
				index[key] = len(dict.Pairs)
				dict.Pairs = append(dict.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(val)})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return dict, nil
		case '[':
			list := pyList{}
			for dec.More() {
				val, err := decodeJSONValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, val)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
	case json.Number:
		s := string(tok)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return int(i), nil
			}
			n, _ := new(big.Int).SetString(s, 10)
			return n, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !math.IsInf(f, 0) {
			return nil, err
		}
		return f, nil // Python also turns 1e400 into inf
	case string, bool, nil:
		return tok, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// pyJSON writes v as Python's json.dumps(v, ensure_ascii=False,
// indent=indent, sort_keys=sortKeys) does: ", " and ": " separators without
// indent, "," and newlines with it, non-ASCII and "<>&'" raw.
type pyJSON struct {
	buf         strings.Builder
	indent      int    // < 0: none
	itemSep     string // "" means Python's default for the indent
	keySep      string
	sortKeys    bool
	ensureASCII bool // escape non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
}

func (p *pyJSON) newline(depth int) {
	p.buf.WriteByte('\n')
	p.buf.WriteString(strings.Repeat(" ", p.indent*depth))
}

func (p *pyJSON) write(v *exec.Value, depth int) error {
	if v == nil || v.IsNil() {
		p.buf.WriteString("null")
		return nil
	}
	if err, ok := v.Interface().(error); ok {
		return err
	}
	rv := v.Val
	for rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface {
		if rv.IsNil() {
			p.buf.WriteString("null")
			return nil
		}
		if n, ok := rv.Interface().(*big.Int); ok {
			p.buf.WriteString(n.String())
			return nil
		}
		if inner, ok := rv.Interface().(*exec.Value); ok {
			return p.write(inner, depth)
		}
		rv = rv.Elem()
	}
	switch rv.Kind() {
	case reflect.Bool:
		p.buf.WriteString(map[bool]string{true: "true", false: "false"}[rv.Bool()])
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.buf.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.buf.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		p.buf.WriteString(pyFloat(rv.Float()))
	case reflect.String:
		writePyString(&p.buf, p.ensureASCII, rv.String())
	case reflect.Slice, reflect.Array:
		n := rv.Len()
		if n == 0 {
			p.buf.WriteString("[]")
			return nil
		}
		p.buf.WriteByte('[')
		for i := range n {
			if i > 0 {
				p.separator()
			}
			if p.indent >= 0 {
				p.newline(depth + 1)
			}
			if err := p.write(exec.ToValue(rv.Index(i)), depth+1); err != nil {
				return err
			}
		}
		if p.indent >= 0 {
			p.newline(depth)
		}
		p.buf.WriteByte(']')
	case reflect.Map, reflect.Struct:
		return p.writeObject(v, depth)
	default:
		return fmt.Errorf("tojson: cannot serialize a %s", rv.Kind())
	}
	return nil
}

func (p *pyJSON) separator() {
	switch {
	case p.itemSep != "":
		p.buf.WriteString(p.itemSep)
	case p.indent >= 0:
		p.buf.WriteByte(',')
	default:
		p.buf.WriteString(", ")
	}
}

func (p *pyJSON) writeObject(v *exec.Value, depth int) error {
	var pairs []*exec.Pair
	switch d := v.Interface().(type) {
	case exec.Dict:
		pairs = d.Pairs
	case *exec.Dict:
		pairs = d.Pairs
	default:
		if !v.IsDict() {
			return fmt.Errorf("tojson: cannot serialize %s", v.Val.Type())
		}
		for _, key := range v.Keys() { // a Go map: sorted keys, there is no other order
			val, _ := v.GetItem(key.Interface())
			pairs = append(pairs, &exec.Pair{Key: key, Value: val})
		}
	}
	if len(pairs) == 0 {
		p.buf.WriteString("{}")
		return nil
	}
	if p.sortKeys {
		pairs = append([]*exec.Pair(nil), pairs...)
		sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].Key.String() < pairs[j].Key.String() })
	}
	p.buf.WriteByte('{')
	for i, pair := range pairs {
		if i > 0 {
			p.separator()
		}
		if p.indent >= 0 {
			p.newline(depth + 1)
		}
		// Python converts int, float, bool and None keys to strings.
		key := pair.Key
		switch {
		case key.IsNil():
			writePyString(&p.buf, p.ensureASCII, "null")
		case key.IsBool():
			writePyString(&p.buf, p.ensureASCII, map[bool]string{true: "true", false: "false"}[key.Bool()])
		case key.IsFloat():
			writePyString(&p.buf, p.ensureASCII, pyFloat(key.Float()))
		default:
			writePyString(&p.buf, p.ensureASCII, key.String())
		}
		if p.keySep != "" {
			p.buf.WriteString(p.keySep)
		} else {
			p.buf.WriteString(": ")
		}
		if err := p.write(pair.Value, depth+1); err != nil {
			return err
		}
	}
	if p.indent >= 0 {
		p.newline(depth)
	}
	p.buf.WriteByte('}')
	return nil
}

// writePyString writes a JSON string literal the way Python's json module
// does: '"', '\\' and control characters escaped, \u escapes in lower-case
// hex, and with ensureASCII every non-ASCII character too.
func writePyString(b *strings.Builder, ensureASCII bool, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
		default:
			// Multi-byte: copy the character (an invalid byte, which a
			// Python str cannot hold, becomes U+FFFD).
			r, w := utf8.DecodeRuneInString(s[i:])
			switch {
			case !ensureASCII:
				b.WriteRune(r)
			case r > 0xFFFF:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			default:
				fmt.Fprintf(b, `\u%04x`, r)
			}
			i += w
			continue
		}
		i++
	}
	b.WriteByte('"')
}

// pyFloat formats f as Python's repr does: the shortest round-trip digits,
// fixed notation for decimal exponents -4..15 (always with a fraction),
// scientific with a signed two-digit exponent outside it.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	sci := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expText, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		return mant + "e" + expText
	}
	fixed := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(fixed, ".") {
		fixed += ".0"
	}
	return fixed
}
