package config

import "errors"

// Apply lays YAML text over cfg (a pointer to a struct holding defaults),
// as a -config file would be, without running Validate: a command keeps its
// departures from the library defaults as an embedded YAML profile and
// applies it in its DefaultConfig, so the library's defaults stay the one
// place each default is written and -h shows the result. name is the
// profile's name in errors; every error Load would report (an unknown key,
// a bad value) is reported the same way.
func Apply(cfg any, name string, data []byte) error {
	root := rootValue(cfg, true)
	l := &loader{root: root.Type(), file: name}
	applyText(l, data, root)
	return errors.Join(l.errs...)
}
