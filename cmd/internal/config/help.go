package config

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// Help writes every key of cfg (a struct or a pointer to one, normally
// DefaultConfig()) with its type, its current value as the default, and its
// help tag, one line each, grouped by section in declaration order. A
// command prints it for -h after its own usage line and flags.
func Help(w io.Writer, cfg any) {
	v := rootValue(cfg, false)
	var rows []helpRow
	collectHelp(v, "", "", &rows)
	keyW, typeW := 0, 0
	for _, r := range rows {
		if !r.header {
			keyW, typeW = max(keyW, len(r.key)), max(typeW, len(r.typ))
		}
	}
	defaultW := 0
	for _, r := range rows {
		if !r.header {
			defaultW = max(defaultW, min(len(r.def), 24))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Config keys and defaults. Set them in a YAML file (-config FILE) or with\n"+
		"key=value arguments: an argument wins over the file, the file over the\n"+
		"default, a later file over an earlier one. Lists take YAML flow syntax.\n"+
		"Example: %s\n\n", examples(rows))
	for i, r := range rows {
		if r.header {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString(r.key + ":")
			if r.help != "" {
				b.WriteString("  " + r.help)
			}
			b.WriteString("\n")
			continue
		}
		line := fmt.Sprintf("  %-*s  %-*s  %-*s", keyW, r.key, typeW, r.typ, defaultW, r.def)
		if r.help != "" {
			line += "  " + r.help
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	io.WriteString(w, b.String())
}

type helpRow struct {
	header        bool // a section title; key and help only
	key, typ, def string
	help          string
}

// collectHelp appends v's own values first, then its sections, so each
// section's keys sit together under one title.
func collectHelp(v reflect.Value, key, help string, rows *[]helpRow) {
	fs := fields(v.Type())
	first := true
	for _, f := range fs {
		if f.shape != scalarShape && f.shape != listShape {
			continue
		}
		if first && key != "" {
			*rows = append(*rows, helpRow{header: true, key: key, help: help})
		}
		first = false
		*rows = append(*rows, helpRow{
			key:  joinKey(key, f.key),
			typ:  typeName(f.typ),
			def:  defaultText(v.FieldByIndex(f.index)),
			help: f.help,
		})
	}
	if first && key != "" && help != "" {
		*rows = append(*rows, helpRow{header: true, key: key, help: help})
	}
	for _, f := range fs {
		fv := v.FieldByIndex(f.index)
		switch f.shape {
		case sectionShape:
			collectHelp(fv, joinKey(key, f.key), f.help, rows)
		case optionalShape:
			h := "optional, unset (null) by default"
			if f.help != "" {
				h = f.help + " (" + h + ")"
			}
			if !fv.IsNil() {
				h = f.help
				fv = fv.Elem()
			} else {
				fv = reflect.New(f.typ.Elem()).Elem()
			}
			collectHelp(fv, joinKey(key, f.key), h, rows)
		}
	}
}

// defaultText writes a value the way it would be typed after key=, via the
// same nodes Dump writes.
func defaultText(v reflect.Value) string {
	n, err := node(v, "")
	if err != nil {
		return "?"
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// examples shows the override syntax on the config's own keys: the first
// value in a section, and the first list, at their defaults.
func examples(rows []helpRow) string {
	var value, list string
	for _, r := range rows {
		switch {
		case r.header:
		case list == "" && strings.HasPrefix(r.typ, "[]") && r.def != "[]":
			list = r.key + "=" + strings.ReplaceAll(r.def, ", ", ",")
		case value == "" && !strings.HasPrefix(r.typ, "[]") && strings.Contains(r.key, ".") && !strings.ContainsAny(r.def, " \"'"):
			value = r.key + "=" + r.def
		}
	}
	switch {
	case value != "" && list != "":
		return value + " " + list
	case value != "" || list != "":
		return value + list
	}
	return "section.key=value"
}
