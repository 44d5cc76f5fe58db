package main

import "path/filepath"

// Size is what every row is trained and measured with.
type Size struct {
	Seeds     int    // seeds 1..Seeds per row
	Steps     int    // RL steps per run
	TestFreq  int    // validate (and checkpoint) every TestFreq steps: the learning curve
	SynthEval int    // held-out test questions (and validation questions) in the world
	ValSize   int    // validation questions per curve point
	SFTSteps  int    // steps of each warm start's SFT (one that Init or Seed1 provides runs none)
	SFTCap    int    // when > 0, at most this many SFT steps, whatever a row's sft.steps says
	Init      string // model folder the warm start starts from ("": a fresh tiny model)
	// Seed1 is the warm start of seed 1 without sft.* overrides, when one
	// was made before with exactly the settings of that SFT run.
	Seed1 string
	// Args are overrides of every cmd/train run (SFT and RL), before the
	// row's own.
	Args []string
}

// FullSize is the table's size: the embedded default's 30 RL steps and 200
// held-out questions, a curve point every 5 steps, and the embedded
// default's warm start of 800 SFT steps (cmd/train's sft.steps), so that
// the GRPO row is `go run ./cmd/train` at each seed and every other row is
// a change of it. Every warm start is made here (the committed one of
// cmd/train's tests is the shorter SFT of an optional row).
var FullSize = Size{Seeds: 3, Steps: 30, TestFreq: 5, SynthEval: 200, ValSize: 50, SFTSteps: 800}

// SmokeSize checks that every row trains and the table renders: the
// committed warm start of cmd/train's test, two steps of batches of 2
// prompts × 4 samples (an eighth of the default's), 20 test questions. It
// took 4 to 6 minutes on 2 cores under a load average of 16 to 23 from
// other work.
var SmokeSize = Size{Seeds: 1, Steps: 2, TestFreq: 2, SynthEval: 20, ValSize: 8, SFTSteps: 2, SFTCap: 2,
	Init: filepath.Join("cmd", "train", "testdata", "warmstart"),
	Args: []string{"data.train_batch_size=2", "rollout.n=4", "actor.ppo_mini_batch_size=8", "sft.batch_size=4"}}

// Kind says how a row is produced.
type Kind int

const (
	// RL trains the row's warm start with cmd/train and evaluates the last
	// and the best-validated checkpoints on the held-out test split.
	RL Kind = iota
	// Warm is the warm-started policy itself, evaluated without RL (the
	// paper's base tool-calling row).
	Warm
	// NaiveRAG is the warm-started policy answering after one retrieval made
	// with the question itself, without tools (cmd/eval's naive-rag).
	NaiveRAG
)

// Row is one line of the table: a name and the key=value overrides of
// cmd/train that make it. Overrides of sft.* keys choose the warm start
// (rows with the same sft.* overrides and seed share one); the others are
// passed to the RL run after the table's own settings, so a row may also
// change the step count. A row whose Pending is set is listed with that
// reason and not run: the place for a setting the trainer cannot express
// yet. An Optional row runs only when -all or -rows asks for it: the full
// table (about 3 hours on 2 cores) leaves it out, and lists it as not run
// until then.
type Row struct {
	Name     string
	Group    string // the table section and the plot it is drawn in
	Kind     Kind
	Args     []string
	Pending  string
	Optional bool
}

// The table's sections, in the order they are rendered.
const (
	groupBaseline  = "baselines"
	groupAlgorithm = "algorithms"
	groupAblation  = "ablations"
	groupChosen    = "how the default was chosen"
	groupFeature   = "features"
)

// referenceRow is the embedded default (GRPO from the default's warm
// start), which the table's Δ column compares every row with.
const referenceRow = "GRPO"

// gold is the warm start on the teacher's full demonstrations (it never
// answers early), the imitation the RL default has to beat.
const gold = "sft.early_answer=0"

// drGRPO is Dr.GRPO's departure from GRPO: no division by the group's std,
// a sequence-mean of token sums over a constant length.
func drGRPO() []string {
	return []string{"algorithm.norm_adv_by_std_in_grpo=false", "actor.loss_agg_mode=seq-mean-token-sum-norm"}
}

// short is the warm start of cmd/train's committed test policy
// (make_warmstart.sh): half the default's SFT steps, at a constant lr.
var short = []string{"sft.steps=400", "sft.optim.schedule=constant"}

// evidence is the process reward for useful searches (env's "evidence").
var evidence = []string{"algorithm.use_process_rewards=true", "env.process.name=evidence", "env.process.useful=0.1", "env.process.useless=-0.1"}

// Rows is the table. Adding a row is adding a line here; the runner, the
// resume logic, the plots and the markdown all follow from it.
var Rows = []Row{
	{Name: "Naive RAG (one retrieval, then answer)", Group: groupBaseline, Kind: NaiveRAG},
	{Name: "warm start, no RL (hasty teacher)", Group: groupBaseline, Kind: Warm},
	{Name: "warm start, no RL (gold demonstrations)", Group: groupBaseline, Kind: Warm, Args: []string{gold}},

	{Name: referenceRow, Group: groupAlgorithm},
	{Name: "PPO (GAE, critic)", Group: groupAlgorithm, Args: []string{"algorithm.adv_estimator=gae"}},
	{Name: "REINFORCE++", Group: groupAlgorithm, Args: []string{"algorithm.adv_estimator=reinforce_plus_plus"}},
	{Name: "REINFORCE++-baseline", Group: groupAlgorithm, Args: []string{"algorithm.adv_estimator=reinforce_plus_plus_baseline"}},
	{Name: "RLOO", Group: groupAlgorithm, Args: []string{"algorithm.adv_estimator=rloo"}},
	{Name: "Dr.GRPO", Group: groupAlgorithm, Args: drGRPO()},
	// DAPO's and GSPO's clips act only on updates after the first of a step
	// (at one update per step the ratio is 1 and DAPO is GRPO), so they run
	// with four, as the optional GRPO row of the same name does.
	{Name: "DAPO (clip-higher, token-mean; 4 updates per step)", Group: groupAlgorithm,
		Args: []string{"actor.clip_ratio_low=0.2", "actor.clip_ratio_high=0.28", "actor.loss_agg_mode=token-mean", "actor.ppo_mini_batch_size=16"}},
	{Name: "GSPO (4 updates per step)", Group: groupAlgorithm,
		Args: []string{"actor.policy_loss=gspo", "actor.loss_agg_mode=seq-mean-token-mean", "actor.clip_ratio_low=0.0003", "actor.clip_ratio_high=0.0004", "actor.ppo_mini_batch_size=16"}},
	{Name: "ReMax", Group: groupAlgorithm, Args: []string{"algorithm.adv_estimator=remax"}},

	// The paper's Table 4: PPO with each row disabling one more mask, then
	// GRPO without its loss mask. GRPO's advantage is a scalar broadcast
	// over the response, so its advantage mask alone changes no weight (the
	// loss mask drops the same tokens): only its loss mask is ablated.
	{Name: "PPO, advantage mask off", Group: groupAblation, Args: []string{"algorithm.adv_estimator=gae", "algorithm.advantage_mask=false"}},
	{Name: "PPO, advantage and loss masks off (environment tokens trained)", Group: groupAblation,
		Args: []string{"algorithm.adv_estimator=gae", "algorithm.advantage_mask=false", "algorithm.loss_mask=false"}},
	{Name: "GRPO, advantage and loss masks off (environment tokens trained)", Group: groupAblation,
		Args: []string{"algorithm.advantage_mask=false", "algorithm.loss_mask=false"}},
	// A process reward for tool use: +0.1 for each call that ran,
	// -0.1 for each that failed (bad JSON, unknown tool, bad arguments).
	{Name: "GRPO, process rewards on (call validity ±0.1)", Group: groupAblation,
		Args: []string{"algorithm.use_process_rewards=true", "env.process.name=call-validity", "env.process.valid=0.1", "env.process.invalid=-0.1"}},
	// A process reward for useful searches: +0.1 for each passage of the
	// question's evidence chain a search finds first, -0.1 for each search
	// that finds none (past the chain's end, a miscopied name, a repeat).
	{Name: "GRPO, process rewards on (evidence ±0.1)", Group: groupAblation, Args: evidence},
	{Name: "Dr.GRPO, process rewards on (evidence ±0.1)", Group: groupAblation, Args: append(drGRPO(), evidence...)},
	{Name: "GRPO, KL in the loss (low_var_kl, 0.001)", Group: groupAblation, Args: []string{"actor.use_kl_loss=true"}},
	{Name: "GRPO, KL in the reward (k1, 0.001)", Group: groupAblation, Args: []string{"algorithm.use_kl_in_reward=true"}},

	// Optional: the runs the default's settings were chosen from. The warm
	// start decides most of what RL reaches here: the 1.6M-parameter policy
	// learns to copy names late in SFT (the loss sits near 0.9 for 100-250
	// steps, depending on the seed), and what is left of the cosine decay
	// after that decides how well names are copied. 400 steps at a
	// constant lr (the committed warm start of cmd/train's tests) leave it
	// miscopying them; 600 was the default before 800.
	{Name: "GRPO from 600 SFT steps (the previous default)", Group: groupChosen, Args: []string{"sft.steps=600"}, Optional: true},
	{Name: "GRPO from 400 SFT steps at a constant lr", Group: groupChosen, Args: short, Optional: true},
	{Name: "warm start, no RL (gold demonstrations, 400 SFT steps at a constant lr)", Group: groupChosen, Kind: Warm,
		Args: append([]string{gold}, short...), Optional: true},
	{Name: "GRPO from the gold warm start", Group: groupChosen, Args: []string{gold}, Optional: true},
	// With ppo_mini_batch_size 64 each step's 64 trajectories (8 prompts × 8
	// samples) make one on-policy update (ratio 1: the clip never acts).
	// Splitting them in four spends the same rollouts and backward passes on
	// four optimizer steps, at the cost of a forward pass for π_old (which
	// a single update takes from its own forward).
	{Name: "GRPO, 4 updates per step (mini-batch 16)", Group: groupChosen, Args: []string{"actor.ppo_mini_batch_size=16"}, Optional: true},
	{Name: "GRPO from the gold warm start, 4 updates per step", Group: groupChosen, Args: []string{gold, "actor.ppo_mini_batch_size=16"}, Optional: true},

	// Features of the trainer that change what it trains on: the rollout
	// one update behind the trainer (rl/async.go), its staleness corrected
	// by the decoupled objective.
	{Name: "GRPO, asynchronous (max_staleness 1, decoupled PPO)", Group: groupFeature,
		Args: []string{"trainer.async=true", "rollout.max_staleness=1", "actor.policy_loss=decoupled"}},
	// The bf16 rollout copy samples from weights rounded to bf16 (a bf16 KV
	// cache, bf16 products where the CPU has them), so the sampler departs
	// from the float32 trainer as vLLM departs from FSDP; token-level
	// importance sampling (TIS, capped at 2) corrects the loss for it.
	{Name: "GRPO, bf16 rollouts, token-level IS (rollout correction)", Group: groupFeature,
		Args: []string{"rollout.dtype=bfloat16", "algorithm.rollout_correction.rollout_is=token"}},
	// Agent-R1's step-level MDP: each turn a sample of its own, credited by
	// GAE over turns with one critic value per turn.
	{Name: "step-level trajectories, step GAE with a critic (Agent-R1)", Group: groupFeature,
		Args: []string{"rollout.trajectory=step", "algorithm.adv_estimator=step_gae"}},
}
