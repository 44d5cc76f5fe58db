package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// -config FILE, as every r1go command takes: a YAML mapping whose keys are
// the command's flags (batch_tokens and batch-tokens alike) and whose
// values are the flags' values. A flag given on the command line wins over
// the file.
var configFile = flag.String("config", "", "YAML file with flag values, e.g. model: DIR (command-line flags win)")

// applyConfigFile sets fs's flags from path for those not set on the
// command line. An unknown key or a bad value names the file and line.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config: %s:%d: want a mapping of flag names to values", path, root.Line)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		name := strings.ReplaceAll(k.Value, "_", "-")
		f := fs.Lookup(name)
		if f == nil || name == "config" {
			var names []string
			fs.VisitAll(func(f *flag.Flag) {
				if f.Name != "config" {
					names = append(names, f.Name)
				}
			})
			return fmt.Errorf("config: %s:%d: unknown key %q (score's keys: %s)", path, k.Line, k.Value, strings.Join(names, ", "))
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("config: %s:%d: %s: want a single value", path, v.Line, k.Value)
		}
		if set[name] {
			continue
		}
		if err := fs.Set(name, v.Value); err != nil {
			return fmt.Errorf("config: %s:%d: %s: %v", path, v.Line, k.Value, err)
		}
	}
	return nil
}
