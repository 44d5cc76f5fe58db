package config

import (
	"errors"
	"flag"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// ErrHelp is returned by Load when the arguments ask for help (-h, -help,
// --help). It is flag.ErrHelp, so a command may test for either.
var ErrHelp = flag.ErrHelp

// Error is one usage error: a bad argument, an unreadable or malformed
// file, a bad value, an unknown key, or a Validate method's complaint.
// Every error Load returns other than ErrHelp is made of these (several
// joined with errors.Join when more than one thing was wrong); a command
// prints it and exits with status 2.
type Error struct {
	File string // the config file, or "" for a command-line argument
	Line int    // 1-based line in File; 0 when unknown or not from a file
	Key  string // the dotted key (actor.lr, data.train_files[1]); "" when the error is not about one key
	Msg  string // what is wrong
	Err  error  // the underlying error (file system, YAML, Validate), if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config: ")
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Load resolves the config cfg points to from the command-line arguments
// args (os.Args[1:] or a subcommand's rest). cfg must be a non-nil pointer
// to a struct already holding the defaults (from DefaultConfig()). In order:
//
//  1. each -config FILE (or --config=FILE) is applied, in the order given;
//  2. then every key=value override, -key value flag for a config key, and
//     ordinary flag in flags, in command-line order, so a later one wins
//     and all of them win over the files;
//  3. then every Validate method in cfg, innermost sections first; a
//     section's Validate runs only when the sections inside it passed.
//
// flags may be nil. Its flags are set with flags.Set, never flags.Parse, so
// nothing is printed; a flag bound to a config field (flags.IntVar(&cfg.
// Rollout.N, "n", ...)) therefore wins over the file like an override does.
// flags must not define config, h or help, nor a name that is a config key
// (a section's name, like -model, is fine).
// Arguments after "--" are all overrides.
//
// Load returns ErrHelp, untouched cfg, when help is asked for anywhere; a
// usage error (see Error) naming every problem found; or nil. On a usage
// error cfg may be half-applied: report the error and stop.
func Load(cfg any, args []string, flags *flag.FlagSet) error {
	root := rootValue(cfg, true)
	checkFlags(root.Type(), flags)
	steps, errs, help := scan(args, flags, root.Type())
	if help {
		return ErrHelp
	}
	l := &loader{root: root.Type(), errs: errs}
	for _, s := range steps {
		if s.kind == fileStep {
			l.loadFile(s.value, root)
		}
	}
	for _, s := range steps {
		switch s.kind {
		case overrideStep:
			l.override(s.value, root)
		case flagStep:
			if err := flags.Set(s.name, s.value); err != nil {
				l.errs = append(l.errs, &Error{Msg: fmt.Sprintf("invalid value %q for flag -%s: %v", s.value, s.name, err), Err: err})
			}
		}
	}
	if len(l.errs) == 0 {
		l.errs, _ = validate(root, "", nil)
	}
	if len(l.errs) > maxErrors {
		more := len(l.errs) - maxErrors
		l.errs = append(l.errs[:maxErrors], &Error{Msg: fmt.Sprintf("and %d more errors", more)})
	}
	return errors.Join(l.errs...)
}

// maxErrors is how many errors Load reports before summing up the rest:
// enough for every typo in a real command line, not a screenful of noise
// from a wrong file.
const maxErrors = 20

type stepKind int

const (
	fileStep stepKind = iota
	overrideStep
	flagStep
)

type step struct {
	kind  stepKind
	name  string // flagStep: the flag name
	value string // the file, "key=value", or the flag's value
}

func checkFlags(root reflect.Type, flags *flag.FlagSet) {
	if flags == nil {
		return
	}
	flags.VisitAll(func(f *flag.Flag) {
		// A section's name is free: -model DIR can be a command's
		// shortcut, as -model is no config flag.
		if f.Name == "config" || f.Name == "h" || f.Name == "help" || isLeafKey(root, f.Name) {
			panic(fmt.Sprintf("config: flag -%s clashes with the config package's own -%s", f.Name, f.Name))
		}
	})
}

// scan splits args into steps the way the flag package reads flags: -name
// and --name are the same, -name=value or -name value, a bool flag takes no
// separate value; and, unlike the flag package, key=value arguments may sit
// between flags. Every error is collected; help wins over all of them.
func scan(args []string, flags *flag.FlagSet, root reflect.Type) (steps []step, errs []error, help bool) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			for _, rest := range args[i+1:] {
				steps, errs = addOverride(steps, errs, rest)
			}
			break
		}
		if len(arg) < 2 || arg[0] != '-' {
			steps, errs = addOverride(steps, errs, arg)
			continue
		}
		name := arg[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		name, value, hasValue := strings.Cut(name, "=")
		if name == "" || name[0] == '-' || name[0] == '=' {
			errs = append(errs, &Error{Msg: fmt.Sprintf("bad flag syntax: %s", arg)})
			continue
		}
		needValue := func() (string, bool) {
			if hasValue {
				return value, true
			}
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			errs = append(errs, &Error{Msg: fmt.Sprintf("flag needs an argument: -%s", name)})
			return "", false
		}
		switch f, isKey := lookupFlag(flags, name), isLeafKey(root, name); {
		case name == "h" || name == "help":
			help = true
		case name == "config":
			if v, ok := needValue(); ok && v != "" {
				steps = append(steps, step{kind: fileStep, value: v})
			} else if ok {
				errs = append(errs, &Error{Msg: "flag -config needs a file name"})
			}
		case f != nil:
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() && !hasValue {
				value, hasValue = "true", true
			}
			if v, ok := needValue(); ok {
				steps = append(steps, step{kind: flagStep, name: name, value: v})
			}
		case isKey:
			if isBoolKey(root, name) && !hasValue {
				value, hasValue = "true", true
			}
			if v, ok := needValue(); ok {
				steps = append(steps, step{kind: overrideStep, value: name + "=" + v})
			}
		default:
			errs = append(errs, &Error{Msg: unknownFlagMsg(name, flags, root)})
			// Its value, if it seems to have one, goes with it, so that
			// one typo is one error.
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && !strings.Contains(args[i+1], "=") {
				i++
			}
		}
	}
	return steps, errs, help
}

func addOverride(steps []step, errs []error, arg string) ([]step, []error) {
	if !strings.Contains(arg, "=") {
		return steps, append(errs, &Error{Msg: fmt.Sprintf("argument %q is not a key=value override or a -flag", arg)})
	}
	return append(steps, step{kind: overrideStep, value: arg}), errs
}

func lookupFlag(flags *flag.FlagSet, name string) *flag.Flag {
	if flags == nil {
		return nil
	}
	return flags.Lookup(name)
}

// leafType returns the type of the value or list at dotted key, or nil.
func leafType(root reflect.Type, key string) reflect.Type {
	t := root
	segs := strings.Split(key, ".")
	for i, seg := range segs {
		f, ok := fieldByKey(t, seg)
		if !ok {
			return nil
		}
		if i == len(segs)-1 {
			if f.shape == scalarShape || f.shape == listShape {
				return f.typ
			}
			return nil
		}
		if f.shape != sectionShape && f.shape != optionalShape {
			return nil
		}
		t = sectionType(f)
	}
	return nil
}

func isLeafKey(root reflect.Type, key string) bool { return leafType(root, key) != nil }

func isBoolKey(root reflect.Type, key string) bool {
	t := leafType(root, key)
	return t != nil && t.Kind() == reflect.Bool && !isText(t)
}

func unknownFlagMsg(name string, flags *flag.FlagSet, root reflect.Type) string {
	known := []string{"config", "help"}
	if flags != nil {
		flags.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
	}
	for _, k := range allKeys(root, "") {
		if isLeafKey(root, k) {
			known = append(known, k)
		}
	}
	sort.Strings(known)
	msg := "unknown flag -" + name
	if s := suggest(name, known); len(s) > 0 {
		for i := range s {
			s[i] = "-" + s[i]
		}
		msg += "; did you mean " + orList(s) + "?"
	}
	return msg
}

type validator interface{ Validate() error }

// validate calls Validate on every section under v, innermost first, then
// on v itself, and prefixes each error with the section's key. A section's
// Validate runs only when all the sections inside it passed, so it may
// rely on them (divide by a size its child checked is positive); siblings
// all run, so every failing section is reported. A section inlined with
// ",inline" is checked through its parent's promoted method.
func validate(v reflect.Value, key string, errs []error) ([]error, bool) {
	ok := true
	for _, f := range fields(v.Type()) {
		fv := v.FieldByIndex(f.index)
		var childOK bool
		switch f.shape {
		case sectionShape:
			errs, childOK = validate(fv, joinKey(key, f.key), errs)
		case optionalShape:
			if fv.IsNil() {
				continue
			}
			errs, childOK = validate(fv.Elem(), joinKey(key, f.key), errs)
		default:
			continue
		}
		ok = ok && childOK
	}
	if !ok {
		return errs, false
	}
	if val, is := v.Addr().Interface().(validator); is {
		if err := val.Validate(); err != nil {
			return append(errs, &Error{Key: key, Msg: err.Error(), Err: err}), false
		}
	}
	return errs, true
}
