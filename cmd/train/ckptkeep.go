package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/r1go/r1go/model"
)

// Checkpoint housekeeping, as verl does it:
//
//   - trainer.max_actor_ckpt_to_keep keeps the newest N checkpoints;
//   - the optimizer state (twice the policy's size for AdamW) and the
//     float32 masters of a bf16 checkpoint are kept only in the newest
//     checkpoint, the one trainer.resume reads; older ones keep the policy,
//     which is what evaluation and comparison need;
//   - a policy from a Hugging Face folder keeps that folder's
//     generation_config.json (its EOS list and sampling defaults);
//   - every folder is 0755: model.SaveFolder writes through a private
//     temporary folder (0700), which would otherwise be what lands.

// resumeOnly are the parts of a checkpoint only resume reads: the
// optimizer state and the float32 masters of a checkpoint saved in bf16.
var resumeOnly = []string{"actor_optim.safetensors", "critic_optim.safetensors", "actor_master", "critic_master"}

// pruneCheckpoints applies the keep policy after the checkpoint of step
// newest has been written and named the latest. It returns the folders it
// removed.
func pruneCheckpoints(run string, keep, newest int) ([]string, error) {
	steps, err := checkpointSteps(run)
	if err != nil {
		return nil, err
	}
	var removed []string
	older := 0
	for i := len(steps) - 1; i >= 0; i-- {
		n := steps[i]
		if n == newest {
			continue
		}
		dir := filepath.Join(run, fmt.Sprintf("global_step_%d", n))
		older++
		if keep > 0 && older >= keep {
			if err := os.RemoveAll(dir); err != nil {
				return removed, err
			}
			removed = append(removed, dir)
			continue
		}
		for _, f := range resumeOnly {
			if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
				return removed, err
			}
		}
	}
	return removed, nil
}

// sourceGeneration returns the generation_config.json of the folder the
// policy came from, or nil (the tiny model's: model.SaveFolder then writes
// one from the config's token ids).
func sourceGeneration(dir string) (*model.GenerationConfig, error) {
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, "generation_config.json")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return model.LoadGenerationConfig(path)
}

// openModes makes every folder under dir (dir included) 0755.
func openModes(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.Chmod(path, 0o755)
		}
		return nil
	})
}

// savePolicy saves m as a Hugging Face folder with the source folder's
// generation config and readable folders.
func savePolicy(m *model.Model, dir, tokenizerDir, dtype string) error {
	gen, err := sourceGeneration(tokenizerDir)
	if err != nil {
		return err
	}
	if err := m.Save(dir, gen, model.SaveOptions{DType: dtype, TokenizerDir: tokenizerDir}); err != nil {
		return err
	}
	return openModes(dir)
}
