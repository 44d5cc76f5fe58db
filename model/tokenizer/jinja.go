package tokenizer

// The Jinja environment chat templates run in: gonja configured and
// extended to behave as transformers' Python jinja2 setup.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// templateError is what raise_exception raises.
type templateError struct{ msg string }

func (e templateError) Error() string { return "raise_exception: " + e.msg }

// jinjaConfig is Jinja configured as transformers configures it.
func jinjaConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = false
	return c
}

// jinjaEnvironment is gonja's with Python's tojson and order-keeping dict
// methods, plus transformers' globals raise_exception and strftime_now.
func jinjaEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	_ = filters.Replace("tojson", filterPyJSON)
	_ = filters.Replace("dictsort", filterDictSort)
	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	globals.Set("raise_exception", func(_ *exec.Evaluator, args *exec.VarArgs) (any, error) {
		msg := ""
		if len(args.Args) > 0 {
			msg = args.Args[0].String()
		}
		return nil, templateError{msg}
	})
	globals.Set("strftime_now", func(_ *exec.Evaluator, args *exec.VarArgs) (any, error) {
		if len(args.Args) != 1 {
			return nil, errors.New("strftime_now takes one format argument")
		}
		return strftime(time.Now(), args.Args[0].String()), nil
	})
	methods := builtins.Methods
	methods.Dict = orderedDictMethods
	methods.Str = strMethods
	return &exec.Environment{
		Context:           globals,
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           methods,
	}
}

func renderJinja(text string, vars map[string]any, fail func(error) error) (out string, err error) {
	// A template is user input; a panic inside the engine is reported as
	// that template's error rather than taking the trainer down.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fail(fmt.Errorf("template engine panic: %v", r))
		}
	}()
	loader, err := loaders.NewMemoryLoader(map[string]string{"/chat_template": text})
	if err != nil {
		return "", fail(err)
	}
	tpl, err := exec.NewTemplate("/chat_template", jinjaConfig(), loader, jinjaEnvironment())
	if err != nil {
		// gonja quotes the whole template in its parse errors; the source
		// name says which one it is.
		return "", fail(errors.New(strings.Replace(err.Error(), "'"+text+"'", "", 1)))
	}
	out, err = tpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		var raised templateError
		if errors.As(err, &raised) {
			return "", fail(raised)
		}
		return "", fail(err)
	}
	return out, nil
}

// filterPyJSON is tojson as transformers defines it: json.dumps with
// ensure_ascii=False, key order kept, Python separators, no HTML escaping;
// its keyword arguments indent, separators, sort_keys and ensure_ascii are
// json.dumps's.
func filterPyJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	p := pyJSON{indent: -1}
	for key, v := range params.KwArgs {
		switch key {
		case "indent":
			if v.IsNil() {
				continue
			}
			if !v.IsInteger() {
				return exec.AsValue(fmt.Errorf("tojson: indent must be an integer, got %s", v.String()))
			}
			p.indent = v.Integer()
		case "sort_keys":
			p.sortKeys = v.IsTrue()
		case "ensure_ascii":
			p.ensureASCII = v.IsTrue()
		case "separators":
			if v.IsNil() {
				continue
			}
			if !v.IsList() || v.Len() != 2 {
				return exec.AsValue(fmt.Errorf("tojson: separators must be a pair of strings, got %s", v.String()))
			}
			p.itemSep, p.keySep = v.Index(0).String(), v.Index(1).String()
		default:
			return exec.AsValue(fmt.Errorf("tojson: unsupported argument %s", key))
		}
	}
	if err := p.write(in, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(p.buf.String())
}

// orderedDictMethods are keys/values/items/get in insertion order, where
// gonja's own sort the keys.
var orderedDictMethods = exec.NewMethodSet(map[string]exec.Method[map[string]any]{
	"keys": func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
		var out []any
		for _, p := range dictPairs(self) {
			out = append(out, p.Key)
		}
		return out, nil
	},
	"values": func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
		var out []any
		for _, p := range dictPairs(self) {
			out = append(out, p.Value)
		}
		return out, nil
	},
	"items": func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
		var out []any
		for _, p := range dictPairs(self) {
			out = append(out, []any{p.Key, p.Value})
		}
		return out, nil
	},
	"get": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 1 || len(args.Args) > 2 {
			return nil, errors.New("get() takes 1 or 2 arguments")
		}
		for _, p := range dictPairs(self) {
			if p.Key.EqualValueTo(args.Args[0]) {
				return p.Value, nil
			}
		}
		if len(args.Args) == 2 {
			return args.Args[1], nil
		}
		return nil, nil
	},
})

// strMethods are gonja's string methods with lstrip and rstrip fixed:
// gonja's default argument is a rune, which fails, and Python strips all
// whitespace when no characters are given.
var strMethods = func() *exec.MethodSet[string] {
	all := map[string]exec.Method[string]{}
	for _, name := range strings.Fields(`capitalize capwords casefold center count encode endswith expandtabs find
		format format_map isalnum isalpha isascii isdecimal isdigit islower isnumeric isprintable isspace istitle
		isupper join ljust lower lstrip partition removeprefix removesuffix replace rfind rjust rpartition rsplit
		rstrip split splitlines startswith strip swapcase title upper zfill`) {
		if m, ok := builtins.Methods.Str.Get(name); ok {
			all[name] = m
		}
	}
	strip := func(trim func(string, string) string, trimSpace func(string) string) exec.Method[string] {
		return func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.Args) == 0 || args.Args[0].IsNil() {
				return trimSpace(self), nil
			}
			return trim(self, args.Args[0].String()), nil
		}
	}
	all["lstrip"] = strip(strings.TrimLeft, func(s string) string { return strings.TrimLeftFunc(s, unicode.IsSpace) })
	all["rstrip"] = strip(strings.TrimRight, func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) })
	all["strip"] = strip(strings.Trim, strings.TrimSpace)
	// gonja's replace requires count and its split/rsplit default to a
	// rune separator; these follow Python's signatures.
	all["replace"] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		if len(args.Args) < 2 || len(args.Args) > 3 {
			return nil, errors.New("replace() takes 2 or 3 arguments")
		}
		count := -1
		if len(args.Args) == 3 {
			count = args.Args[2].Integer()
		}
		return strings.Replace(self, args.Args[0].String(), args.Args[1].String(), count), nil
	}
	all["split"] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		return pySplit(self, args, false)
	}
	all["rsplit"] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		return pySplit(self, args, true)
	}
	return exec.NewMethodSet(all)
}()

// pySplit is Python's str.split / str.rsplit(sep=None, maxsplit=-1).
func pySplit(s string, args *exec.VarArgs, fromRight bool) (pyList, error) {
	var sep *string
	maxsplit := -1
	get := func(i int, name string) *exec.Value {
		if i < len(args.Args) {
			return args.Args[i]
		}
		return args.KwArgs[name]
	}
	if v := get(0, "sep"); v != nil && !v.IsNil() {
		str := v.String()
		if str == "" {
			return nil, errors.New("split(): empty separator")
		}
		sep = &str
	}
	if v := get(1, "maxsplit"); v != nil {
		maxsplit = v.Integer()
	}
	var parts []string
	if sep != nil {
		switch {
		case maxsplit < 0:
			parts = strings.Split(s, *sep)
		case !fromRight:
			parts = strings.SplitN(s, *sep, maxsplit+1)
		default:
			for len(parts) < maxsplit {
				k := strings.LastIndex(s, *sep)
				if k < 0 {
					break
				}
				parts = append([]string{s[k+len(*sep):]}, parts...)
				s = s[:k]
			}
			parts = append([]string{s}, parts...)
		}
	} else {
		// Runs of whitespace separate; ends are ignored. With maxsplit the
		// unsplit rest keeps its inner and far-end whitespace.
		fields := strings.FieldsFunc(s, unicode.IsSpace)
		if maxsplit < 0 || len(fields) <= maxsplit+1 {
			parts = fields
		} else if !fromRight {
			rest := strings.TrimLeftFunc(s, unicode.IsSpace)
			for range maxsplit {
				k := strings.IndexFunc(rest, unicode.IsSpace)
				parts = append(parts, rest[:k])
				rest = strings.TrimLeftFunc(rest[k:], unicode.IsSpace)
			}
			parts = append(parts, rest)
		} else {
			rest := strings.TrimRightFunc(s, unicode.IsSpace)
			var tail []string
			for range maxsplit {
				k := strings.LastIndexFunc(rest, unicode.IsSpace)
				tail = append([]string{rest[k+1:]}, tail...)
				rest = strings.TrimRightFunc(rest[:k+1], unicode.IsSpace)
			}
			parts = append([]string{rest}, tail...)
		}
	}
	out := make(pyList, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

// filterDictSort is Jinja's dictsort for ordered dicts too (gonja's sees
// only Go maps): (key, value) pairs sorted by key, or by value with
// by="value", case-insensitively unless case_sensitive=True.
func filterDictSort(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	if !in.IsDict() {
		return exec.AsValue(fmt.Errorf("dictsort: %s is not a mapping", in.String()))
	}
	byValue := false
	if v, ok := params.KwArgs["by"]; ok {
		switch v.String() {
		case "key":
		case "value":
			byValue = true
		default:
			return exec.AsValue(errors.New("dictsort: by must be 'key' or 'value'"))
		}
	}
	caseSensitive := params.KwArgs["case_sensitive"] != nil && params.KwArgs["case_sensitive"].IsTrue()
	reverse := params.KwArgs["reverse"] != nil && params.KwArgs["reverse"].IsTrue()
	pairs := append([]*exec.Pair(nil), dictPairs(in)...)
	sortKey := func(p *exec.Pair) *exec.Value {
		v := p.Key
		if byValue {
			v = p.Value
		}
		if !caseSensitive && v.IsString() {
			return exec.AsValue(strings.ToLower(v.String()))
		}
		return v
	}
	sort.SliceStable(pairs, func(i, j int) bool {
		a := exec.ValuesList{sortKey(pairs[i]), sortKey(pairs[j])}
		if reverse {
			return a.Less(1, 0)
		}
		return a.Less(0, 1)
	})
	out := make([]any, len(pairs))
	for i, p := range pairs {
		out[i] = []any{p.Key, p.Value}
	}
	return exec.AsValue(out)
}

func dictPairs(v *exec.Value) []*exec.Pair {
	switch d := v.Interface().(type) {
	case exec.Dict:
		return d.Pairs
	case *exec.Dict:
		return d.Pairs
	}
	var pairs []*exec.Pair
	for _, key := range v.Keys() {
		val, _ := v.GetItem(key.Interface())
		pairs = append(pairs, &exec.Pair{Key: key, Value: val})
	}
	return pairs
}

// strftime formats t with the C/Python directives chat templates use
// ("%d %b %Y" in Llama 3.1's).
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(map[bool]string{true: "AM", false: "PM"}[t.Hour() < 12])
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
