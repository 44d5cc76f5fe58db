package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/r1go/r1go/cmd/internal/agent"
	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/rl"
)

// Checkpoint layout, in the run folder (verl's names):
//
//	global_step_N/actor/            the policy, a Hugging Face folder
//	global_step_N/actor_optim.safetensors
//	global_step_N/actor_master/     float32 weights, when actor/ is saved in less
//	global_step_N/critic/, critic_optim.safetensors   (PPO only)
//	global_step_N/trainer_state.json                  step, KL coefficient, data position
//	latest_checkpointed_iteration.txt                 N
//
// The rollout's sampling seed is a function of the step (rollout.seed and
// the step number, rl.RolloutConfig.StepSeed), so the state holds everything else a run depends on. A checkpoint is written into a
// temporary folder and renamed into place, and the latest-iteration file is
// replaced atomically after it, so a crash mid-save leaves the previous
// checkpoint intact and named.

type trainerState struct {
	Step    int               `json:"step"`
	KLCoef  float64           `json:"kl_coef"`
	Sampler data.SamplerState `json:"data_sampler"`
	// Async is an asynchronous run's rollout (rl.AsyncState): Sampler is
	// then the position before its oldest batch with untrained groups.
	Async *rl.AsyncState `json:"async,omitempty"`
	// AsyncRanks is, in a run with more than one rollout rank
	// (dp.rollout_ranks), each rollout rank's, in rank order.
	AsyncRanks []rl.AsyncState `json:"async_ranks,omitempty"`
	dir        string
}

func saveCheckpoint(run string, tr *rl.Trainer, s *agent.Setup, pos data.SamplerState, saveDType string) error {
	final := filepath.Join(run, fmt.Sprintf("global_step_%d", tr.Steps()))
	tmp := final + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	dtype, err := model.SaveDTypeFor(tr.Policy.Config, saveDType)
	if err != nil {
		return err
	}
	if err := savePolicy(tr.Policy, filepath.Join(tmp, "actor"), s.TokenizerDir, dtype); err != nil {
		return err
	}
	if err := saveMaster(tr.Policy, filepath.Join(tmp, "actor_master"), dtype); err != nil {
		return err
	}
	if err := tr.SaveOptimizer(tr.ActorOpt, filepath.Join(tmp, "actor_optim.safetensors")); err != nil {
		return err
	}
	if err := saveAdapter(tr, tmp); err != nil {
		return err
	}
	if tr.Critic != nil {
		if err := savePolicy(tr.Critic, filepath.Join(tmp, "critic"), s.TokenizerDir, dtype); err != nil {
			return err
		}
		if err := saveMaster(tr.Critic, filepath.Join(tmp, "critic_master"), dtype); err != nil {
			return err
		}
		if err := tr.SaveOptimizer(tr.CriticOpt, filepath.Join(tmp, "critic_optim.safetensors")); err != nil {
			return err
		}
	}
	st := trainerState{Step: tr.Steps(), KLCoef: tr.KLCtrl.Value(), Sampler: pos}
	if one, ranks, pos, ok := asyncState(tr); ok { // in-flight trajectories are regenerated on resume
		st.Async, st.AsyncRanks, st.Sampler = one, ranks, pos
	}
	if err := writeJSON(filepath.Join(tmp, "trainer_state.json"), st); err != nil {
		return err
	}
	os.RemoveAll(final)
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	latest := filepath.Join(run, "latest_checkpointed_iteration.txt")
	if err := os.WriteFile(latest+".tmp", []byte(strconv.Itoa(tr.Steps())+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(latest+".tmp", latest)
}

// latestCheckpoint reads the run folder's latest checkpoint; a run folder
// without one is an error, since resume was asked for.
func latestCheckpoint(run string) (*trainerState, error) {
	raw, err := os.ReadFile(filepath.Join(run, "latest_checkpointed_iteration.txt"))
	if err != nil {
		return nil, fmt.Errorf("trainer.resume: no checkpoint in %s: %w", run, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("trainer.resume: %s/latest_checkpointed_iteration.txt holds %q, not a step", run, raw)
	}
	st := &trainerState{dir: filepath.Join(run, fmt.Sprintf("global_step_%d", n))}
	if err := readJSON(filepath.Join(st.dir, "trainer_state.json"), st); err != nil {
		return nil, err
	}
	if st.Step != n {
		return nil, fmt.Errorf("trainer.resume: %s says step %d, the latest-iteration file %d", st.dir, st.Step, n)
	}
	return st, nil
}

// restore puts the optimizer, critic and counters of the checkpoint into tr
// (the policy's weights were loaded before the trainer was built).
func (s *trainerState) restore(tr *rl.Trainer) error {
	if err := tr.LoadOptimizer(tr.ActorOpt, filepath.Join(s.dir, "actor_optim.safetensors")); err != nil {
		return err
	}
	if tr.Critic != nil {
		if err := loadWeights(tr.Critic, masterOr(s.dir, "critic")); err != nil {
			return err
		}
		if err := tr.LoadOptimizer(tr.CriticOpt, filepath.Join(s.dir, "critic_optim.safetensors")); err != nil {
			return err
		}
	}
	tr.SetSteps(s.Step)
	switch c := tr.KLCtrl.(type) {
	case *rl.FixedKL:
		c.Coef = s.KLCoef
	case *rl.AdaptiveKL:
		c.Coef = s.KLCoef
	}
	return nil
}

// saveMaster writes m's float32 weights beside a checkpoint whose model
// folder was saved as dtype, when that loses bits: the trainer's weights are
// float32 masters, and a bf16 actor/ (trainer.save_dtype=auto on a bf16
// model) rounds away every update smaller than bf16's spacing, about 1e-4 of a
// 0.02 weight, more than a whole step at lr 1e-6. Resume reads the master
// copy, so a resumed run continues from the exact weights; like the
// optimizer state it is kept only in the newest checkpoint. A LoRA policy's
// trained weights are its adapters, which saveAdapter keeps in float32.
func saveMaster(m *model.Model, dir, dtype string) error {
	if dtype == "float32" || m.Adapters() != nil {
		return nil
	}
	return savePolicy(m, dir, "", "float32")
}

// masterOr names the folder resume loads a model's weights from: its
// float32 master copy when the checkpoint has one, else the model folder.
func masterOr(ckpt, name string) string {
	master := filepath.Join(ckpt, name+"_master")
	if _, err := os.Stat(filepath.Join(master, "model.safetensors")); err == nil {
		return master
	}
	return filepath.Join(ckpt, name)
}

// loadWeights copies the weights of a saved folder into m.
func loadWeights(m *model.Model, dir string) error {
	src, err := model.Load(dir, m.Dev, m.Head)
	if err != nil {
		return err
	}
	if src.NumParams() != m.NumParams() {
		return fmt.Errorf("checkpoint %s has %d parameters, the model %d", dir, src.NumParams(), m.NumParams())
	}
	m.Dev.Copy(m.Params, src.Params)
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
