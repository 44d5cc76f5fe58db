package config

import (
	"encoding"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Dump writes cfg (a struct or a pointer to one) as YAML: every key, in
// declaration order, with its resolved value; lists in flow style
// ([a, b]), durations as 1m30s, an unset optional section as null. Loading
// the output with -config reproduces the same struct: floats are written
// with the fewest digits that read back exactly, strings that YAML would
// read as something else are quoted, and empty lists are written [] and
// read back as nil.
func Dump(w io.Writer, cfg any) error {
	n, err := node(rootValue(cfg, false), "")
	if err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return fmt.Errorf("config: writing YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("config: writing YAML: %w", err)
	}
	return nil
}

// node builds the YAML node for v, found at key.
func node(v reflect.Value, key string) (*yaml.Node, error) {
	switch mustShape(v.Type()) {
	case scalarShape:
		return scalarNode(v, key)
	case listShape:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for i := range v.Len() {
			e, err := scalarNode(v.Index(i), fmt.Sprintf("%s[%d]", key, i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, e)
		}
		return n, nil
	case optionalShape:
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
		}
		return node(v.Elem(), key)
	}
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, f := range fields(v.Type()) {
		c, err := node(v.FieldByIndex(f.index), joinKey(key, f.key))
		if err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: f.key}, c)
	}
	return n, nil
}

// scalarNode writes one value with an explicit tag; yaml.v3 then quotes a
// string only when reading it plain would give another type ("true",
// "1e-6", "").
func scalarNode(v reflect.Value, key string) (*yaml.Node, error) {
	text, tag, err := scalarText(v)
	if err != nil {
		return nil, &Error{Key: key, Msg: err.Error(), Err: err}
	}
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: text}
	if tag == "!!str" && strings.ContainsFunc(text, func(r rune) bool { return r < ' ' || r == 0x7f }) && !readsBack(n) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n, nil
}

// readsBack reports whether yaml.v3 reads the string it writes for n back
// unchanged. Its block styles lose some strings of only line breaks
// ("\n" is written as an empty |2+ block); double quotes, with escapes,
// lose nothing.
func readsBack(n *yaml.Node) bool {
	out, err := yaml.Marshal(n)
	if err != nil {
		return false
	}
	var back string
	return yaml.Unmarshal(out, &back) == nil && back == n.Value
}

func scalarText(v reflect.Value) (text, tag string, err error) {
	t := v.Type()
	if isText(t) {
		m, ok := v.Interface().(encoding.TextMarshaler)
		if !ok {
			m = addressable(v).Addr().Interface().(encoding.TextMarshaler)
		}
		b, err := m.MarshalText()
		if err != nil {
			return "", "", err
		}
		return string(b), "!!str", nil
	}
	if t == durationType {
		return time.Duration(v.Int()).String(), "!!str", nil
	}
	switch t.Kind() {
	case reflect.String:
		return v.String(), "!!str", nil
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), "!!bool", nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), "!!int", nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(v.Uint(), 10), "!!int", nil
	case reflect.Float32, reflect.Float64:
		return formatFloat(v.Float(), t.Bits()), "!!float", nil
	}
	panic("config: scalarText on " + t.String())
}

// formatFloat writes the shortest text that parses back to f at its width,
// always with a '.' or exponent so that YAML reads it as a float.
func formatFloat(f float64, bits int) string {
	switch {
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	case math.IsNaN(f):
		return ".nan"
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// addressable returns v, or an addressable copy when v is not (a Dump of a
// struct passed by value whose text type marshals through a pointer).
func addressable(v reflect.Value) reflect.Value {
	if v.CanAddr() {
		return v
	}
	c := reflect.New(v.Type()).Elem()
	c.Set(v)
	return c
}
