package main

import (
	"fmt"
	"io"

	"github.com/r1go/r1go/cmd/internal/config"
)

// printHelp is train -h: the usage line, then config.Help's key table,
// which brings its own header.
func printHelp(w io.Writer, cfg *Config) {
	fmt.Fprintln(w, "usage: train [-config FILE.yaml] [-cpuprofile FILE] [key=value ...]")
	fmt.Fprintln(w, "\nExamples for the paper's settings (Qwen2.5-Instruct, HotpotQA, wiki-18): examples/*.yaml")
	fmt.Fprintln(w)
	config.Help(w, cfg)
}
