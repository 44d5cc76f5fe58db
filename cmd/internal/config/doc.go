// Package config loads the typed configuration structs of r1go's commands
// (train, eval, ...) from defaults, YAML files and command-line arguments,
// and prints and saves them.
//
// A command owns a plain struct of sections and a DefaultConfig() that
// fills it; the package adds no defaults of its own and keeps none in
// lookups. Keys come from yaml tags, help text from help tags:
//
//	type ActorConfig struct {
//		LR               float64 `yaml:"lr" help:"actor learning rate"`
//		PPOMiniBatchSize int     `yaml:"ppo_mini_batch_size" help:"prompts per PPO minibatch"`
//	}
//	type TrainConfig struct {
//		Actor ActorConfig `yaml:"actor" help:"policy optimisation"`
//		...
//	}
//
//	cfg := DefaultConfig()
//	fs := flag.NewFlagSet("train", flag.ContinueOnError)
//	device := fs.String("device", "auto", "cpu, cuda or auto")
//	switch err := config.Load(&cfg, os.Args[1:], fs); {
//	case errors.Is(err, config.ErrHelp):
//		fs.PrintDefaults(); config.Help(os.Stdout, &cfg); os.Exit(0)
//	case err != nil:
//		fmt.Fprintln(os.Stderr, err); os.Exit(2)
//	}
//	config.Dump(os.Stdout, &cfg) // echo the resolved config; save it beside checkpoints
//
// Load applies, lowest precedence first: the defaults already in the
// struct; each -config FILE (YAML), later files winning; then key=value
// overrides, -key value flags for config keys (-actor.lr 1e-6, and a bare
// -trainer.resume for a bool), and the command's own flag.FlagSet flags,
// all in command-line order so the last one wins; then each section's
// Validate() error method, innermost first. -flag and --flag are the
// same, as in package flag; -h, -help and --help return ErrHelp.
//
// Help prints every key with its type, default and help text, grouped by
// section; Dump writes the resolved config as YAML that -config reads
// back to the same struct (the trainer echoes it at start and saves it
// beside its checkpoints).
//
// Values. A field may be a string, bool, signed or unsigned int, float,
// time.Duration (90s, 1h30m), a type with UnmarshalText and MarshalText
// (an enum), a slice of any of those, a struct (a section) or a pointer to
// a struct (an optional section: null when unset; setting one of its keys
// creates it with zero values). A struct field tagged `yaml:",inline"`
// adds its keys to its parent.
//
// Override syntax. key=value with a dotted key (actor.lr=1e-6). A string
// value is taken verbatim unless it starts with a quote, when YAML
// unquotes it. A list is written in YAML flow syntax,
// trainer.logger=[console,jsonl] (Hydra's ['console','wandb'] works too);
// a single unquoted value without commas is a one-element list, an empty
// value or [] an empty one (nil). An unquoted single value with a comma
// ("a.parquet,b.parquet") is refused rather than guessed at. A section
// takes a YAML flow mapping, actor={lr: 1e-6}; an optional section also
// takes null.
//
// YAML files are read with the same rules: like yaml.v3's KnownFields, an
// unknown key is an error, but the package walks the YAML node tree itself
// so that every error names the file, the line and the full dotted key,
// and an unknown key names the closest known ones. Anchors, aliases and
// merge keys (<<) work; a key set twice in one mapping is an error.
//
// Error policy. Bad input is the user's: Load returns usage errors (*Error,
// several joined by errors.Join) naming the file and line or the argument,
// the key, and the expected type ("config: actor.lr: "abc" is not a
// float"), after collecting every problem, and applies no Validate method
// unless everything parsed. Help requested returns ErrHelp. A config type
// the package cannot hold (a map field, two fields with one key, a type
// that contains itself), a nil config, or a command flag named like a
// config key is a programmer's mistake and panics.
package config
