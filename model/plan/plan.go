// Package plan computes a run's memory plan before any weights are loaded:
// what the command will hold on its device (weights, master weights,
// gradients, optimizer state, reference policy, critic, KV cache,
// activations at the micro-batch, workspace), from config.json and the
// run's settings alone, so a GPU run can be planned on a laptop.
//
// The central type is Plan, made by New from a model.Config and Settings.
// Sizes follow the arenas the model package allocates (model.NewWith:
// gradients only for a trainable model, bf16 storage for a frozen one;
// AttachLoRA's adapters; NewKVCache; the activation arenas of Forward and
// Step, with the automatic recomputation bound and a long batch's groups
// of sequences (group.go); optim.New's AdamW moments in their state dtype)
// and, for "bf16-mixed", the CUDA device's Device.UseBF16 copies, its bf16
// KV cache, residual stream and layer activations (AllocCompute) and its
// frozen bf16 reference (AllocBF16: no fp32 arena); TestPlanMatchesCPUAllocations checks them against
// what the CPU device really allocates, and cuda's
// TestGPUPlanMatchesEmuAllocLog checks a "bf16-mixed" plan, with the CUDA
// device's own scratch, against the emulator's allocation log. Errors:
// New rejects settings it cannot plan; Check returns an error naming the
// largest items and the settings that would make the plan fit when it
// does not.
//
// It lives beside model, not in rl or cmd, because every command (train,
// eval, score, the benchmarks) needs it before anything else exists and
// because its formulas are the model's arena layouts.
package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/r1go/r1go/model"
)

// GiB is 2^30 bytes: plans are printed in GiB.
const GiB = 1 << 30

// Settings are the parts of a run that decide its memory.
type Settings struct {
	Device    string // "cpu" or "cuda"
	Capacity  int64  // device memory in bytes; 0 when unknown
	Precision string // "fp32", or "bf16-mixed" (CUDA Device.UseBF16: bf16 weight copies beside the fp32 masters and AdamW)

	Train     bool // holds gradients used by an optimizer and training activations
	Reference bool // a frozen reference policy (KL loss or KL in the reward)
	Critic    bool // a value model with its own optimizer (GAE)
	Recompute bool // activation recomputation in the backward
	// SaveBytes is the model's bound on saved layer activations
	// (model.Model.SaveBytes; 0: the automatic 1 GiB): a training
	// forward over it recomputes even when Recompute is off.
	SaveBytes int64
	BaseModel bool // a second policy held beside the first (eval's base-tool-call baseline)
	RefBF16   bool // the reference's frozen weights are stored as bf16 (a bf16 source folder on the CPU)
	// RolloutBF16: the rollout samples from a bf16 copy of the policy
	// (rollout.dtype bfloat16), rewritten before each rollout and
	// discarded after it; its KV cache is bf16 too.
	RolloutBF16 bool
	// AsyncSlots > 0: asynchronous training (trainer.async) keeps a copy
	// of the policy (bf16 with AsyncBF16; fp32 with a bf16 compute copy
	// in mixed precision), a KV cache of AsyncSlots and its step
	// activations resident beside the update.
	AsyncSlots int
	AsyncBF16  bool
	// RefOffload and OptimOffload: the reference's weights and the actor's
	// AdamW moments live in file mappings, resident while the reference
	// scores and during the optimizer step only; with OptimOffload the
	// training activations are given back before that step
	// (trainer.ref_offload, trainer.optim_offload; the CPU).
	RefOffload, OptimOffload bool
	// FrozenBF16: a run that does not train (eval, score, serve), or the
	// base of a LoRA run, loads its models frozen, and they keep the
	// folder's bf16 (each device stores bf16).
	FrozenBF16 bool

	LoRARank    int      // > 0: the policy is a frozen base with rank-r adapters, and the reference is that base
	LoRATargets []string // the adapted projections; empty or "all-linear": all seven

	StateBF16       bool // the actor's AdamW moments are bf16 (optim state_dtype bfloat16)
	CriticStateBF16 bool // the critic's likewise

	// Data parallel (rl/dp.Config): the plan is one rank's.
	Ranks int  // world size; 0 or 1: one process
	Zero1 bool // dp.zero1: the AdamW moments are sharded over the ranks (stage 1)
	Zero  int  // dp.zero: the ZeRO stage, 0, 1 or 2 (dp.go); Zero1 means at least 1
	// CUDAPaging plans a CUDA device that also gives back the fp32 master
	// weights outside its ZeRO shard (dp.shard_masters; its gradients it
	// gives back under ZeRO-2 anyway, through VMM arenas: dp.go).
	CUDAPaging bool
	// CUDANoVMM plans a CUDA device without virtual memory management
	// (cuda.Device.VMM false): its gradient arena stays whole under ZeRO-2.
	CUDANoVMM bool
	BucketMB  float64 // dp.bucket_mb; 0: 25

	MicroBatchTokens int // tokens per forward/backward (training and scoring)
	RolloutSlots     int // KV cache slots decoded together; 0: no rollout
	MaxContext       int // KV cache length per slot and the longest sequence
	MaxPromptTokens  int // longest prompt, for the rollout's prefill step
	GroupSize        int // samples per prompt (leaders prefill, the rest copy)
	// EvalSlots are the slots of a held-out evaluation run between
	// training steps (cmd/train's validation and test after RL): one
	// question a slot, every slot prefilling its prompt in one step through
	// the model's one step arena. 0: no evaluation. EvalOwnCache: it
	// decodes in a KV cache of its own beside the rollout's (cmd/train
	// shares the rollout's unless a bf16 rollout copy or external agents
	// hold it).
	EvalSlots    int
	EvalOwnCache bool
	// PrefillTokens is the rollout's prefill budget (rl.RolloutConfig's
	// prefill_tokens): a step feeds at most this many tokens. 0: no limit.
	PrefillTokens int
	// RewriteTokens is, in step mode with a context policy that rewrites
	// the context (env.context window or drop_observations), the longest
	// context a slot refills its cache with when its context is rewritten
	// (the model's window): any slot may, all in one step. 0: no rewrites.
	RewriteTokens int
	Threads       int // CPU worker threads (workspace); 0 counts one

	// Keys name the settings in advice, by knob: "micro_batch", "recompute",
	// "slots", "zero1", "zero", "shard_masters". Missing names take train's keys; a knob named "" is not
	// offered (the command has no such setting).
	Keys map[string]string
}

var defaultKeys = map[string]string{
	"micro_batch":   "actor.micro_batch_tokens",
	"recompute":     "trainer.recompute",
	"slots":         "rollout.slots",
	"zero1":         "dp.zero1",
	"zero":          "dp.zero",
	"shard_masters": "dp.shard_masters",
}

func (s Settings) key(knob string) string {
	if k, ok := s.Keys[knob]; ok {
		return k
	}
	return defaultKeys[knob]
}

// Item is one line of a plan.
type Item struct {
	Name   string
	Bytes  int64
	Detail string // how it was counted
	// Phase, when set, is the only part of a step in which the item is
	// resident (an offloaded reference while it scores, offloaded moments
	// during the optimizer step, activations given back before it); empty:
	// resident throughout.
	Phase string
}

// Plan is a run's memory on one device.
type Plan struct {
	Model    string // e.g. "qwen2 36 layers, hidden 2048, 3.09B parameters"
	Settings Settings
	Items    []Item
}

// Total is the peak: the items resident throughout plus, for the phase
// that holds the most, that phase's items (with no phases, the sum of
// all). A training Forward frees the policy's decode arena, but the
// training arena it keeps lives through the next rollout, whose Step
// allocates the decode arena again (Step frees only a scoring arena), so
// a trainer's steady state holds both unless the arena is given back
// before the optimizer step (optim offload); the KV cache lives as long as
// the rollout policy.
func (p *Plan) Total() int64 {
	var always, most int64
	phases := map[string]int64{}
	for _, it := range p.Items {
		if it.Phase == "" {
			always += it.Bytes
			continue
		}
		phases[it.Phase] += it.Bytes
		most = max(most, phases[it.Phase])
	}
	return always + most
}

// Fits reports whether the total fits the capacity (true when unknown).
func (p *Plan) Fits() bool { return p.Settings.Capacity <= 0 || p.Total() <= p.Settings.Capacity }

// largestBatch is the most tokens of one forward: a micro-batch, or a
// sequence longer than the micro-batch, which is a micro-batch of its own.
func (s Settings) largestBatch() int {
	if s.MaxContext > s.MicroBatchTokens && s.MicroBatchTokens > 0 {
		return s.MaxContext
	}
	return s.MicroBatchTokens
}

// New plans cfg under s.
func New(cfg *model.Config, s Settings) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch s.Precision {
	case "":
		s.Precision = "fp32"
	case "fp32", "bf16-mixed":
	default:
		return nil, fmt.Errorf("plan: precision %q is not fp32 or bf16-mixed", s.Precision)
	}
	if s.MicroBatchTokens < 1 && s.Train {
		return nil, fmt.Errorf("plan: micro-batch of %d tokens", s.MicroBatchTokens)
	}
	if s.RolloutSlots < 0 || s.MaxContext < 0 || s.MicroBatchTokens < 0 {
		return nil, fmt.Errorf("plan: negative setting (slots %d, context %d, micro-batch %d)", s.RolloutSlots, s.MaxContext, s.MicroBatchTokens)
	}
	sh := shapeOf(cfg)
	n := float64(cfg.ParamCount())
	size := fmt.Sprintf("%.2fB", n/1e9)
	if n < 1e9 {
		size = fmt.Sprintf("%.1fM", n/1e6)
	}
	p := &Plan{Settings: s, Model: fmt.Sprintf("%s, %d layers, hidden %d, %s parameters", cfg.ModelType, sh.L, sh.C, size)}
	add := func(name string, bytes int64, detail string, args ...any) {
		p.Items = append(p.Items, Item{Name: name, Bytes: bytes, Detail: fmt.Sprintf(detail, args...)})
	}
	// phase makes the last item resident in one phase only.
	phase := func(name, why string) {
		it := &p.Items[len(p.Items)-1]
		it.Phase, it.Detail = name, it.Detail+"; "+why
	}
	mixed := s.Precision == "bf16-mixed"
	lora := s.LoRARank > 0
	T := s.largestBatch()
	P := sh.arena(true, false)
	// Weights. Mixed precision (cuda Device.UseBF16) keeps the float32
	// arena, which the optimizer updates, and adds a bf16 compute copy.
	if mixed {
		add("weights", P*2, "%d parameters × 2 B, the bf16 compute copy (Device.UseBF16)", P)
		if lora {
			add("master weights", P*4, "the frozen base's fp32 arena the bf16 copy is made from")
		} else {
			b, how := s.masters(sh, P)
			add("master weights", b, "%s", how)
		}
	} else if (!s.Train || lora) && s.FrozenBF16 {
		add("weights", P*2, "%d parameters × 2 B, frozen, bf16 as in the folder", P)
		add("master weights", 0, "none: the weights are not trained")
	} else {
		add("weights", P*4, "%d parameters × 4 B", P)
		add("master weights", 0, "none: the weights are fp32")
	}
	switch {
	case lora:
		add("gradients", 0, "none: the base is frozen under LoRA adapters")
	case s.Train:
		b, how := s.grads(sh, P, true, false)
		add("gradients", b, "%s", how)
	default:
		add("gradients", 0, "none: the model is loaded frozen")
	}
	sb, state := int64(4), "fp32"
	if s.StateBF16 {
		sb, state = 2, "bf16 (optim state_dtype bfloat16)"
	}
	var dpScratch int64 // ZeRO-1's, of every optimizer
	if lora {
		A := sh.loraParams(s.LoRARank, s.LoRATargets)
		add("LoRA adapters", 2*A*4+2*int64(T*s.LoRARank)*4, "rank %d: %d fp32 parameters and their gradients, A·x scratch at %d tokens", s.LoRARank, A, T)
		st, sc, how := s.moments(A, sb)
		dpScratch += sc
		add("optimizer state", st, "AdamW first and second moments of the adapters, %s%s", state, how)
	} else if s.Train {
		st, sc, how := s.moments(P, sb)
		dpScratch += sc
		add("optimizer state", st, "AdamW first and second moments, %s%s", state, how)
		if s.OptimOffload && s.Device == "cpu" {
			phase("optimizer step", "resident during the optimizer step only (trainer.optim_offload)")
		}
	} else {
		add("optimizer state", 0, "none: no training")
	}
	if s.Reference {
		var ref int64
		detail := ""
		switch {
		case lora:
			detail = "the frozen base itself (no weights of its own)"
		case mixed:
			ref = P * 2
			detail = "frozen (no gradients), bf16 weights only (cuda AllocBF16: fp32 sources rounded once at load)"
		case s.RefBF16:
			ref = P * 2
			detail = "frozen (no gradients), weights stored as bf16"
		default:
			ref = P * 4
			detail = "frozen (no gradients), fp32 weights"
		}
		ref += s.forwardBytes(sh, T, 0, false)
		add("reference policy", ref, "%s, plus scoring activations at %d tokens%s", detail, T, s.groupDetail(sh, T, 0, false))
		if s.RefOffload && s.Device == "cpu" {
			phase("reference scoring", "resident while it scores only (trainer.ref_offload)")
		}
	}
	if s.RolloutBF16 && s.Train {
		add("rollout copy", P*2, "bf16 copy of the policy that the rollout samples from (rollout.dtype bfloat16)")
		phase("rollout", "its pages are given back after each rollout")
	}
	if s.AsyncSlots > 0 && s.Train {
		w, kvb, what := P*4, int64(4), "fp32"
		switch {
		case mixed: // fp32 weights with their bf16 compute copy, as the policy's (rl.StartAsync)
			w, kvb, what = P*6, 2, "fp32 and bf16"
		case s.AsyncBF16:
			w, kvb, what = P*2, 2, "bf16"
		}
		kv := 2 * int64(sh.L) * int64(s.AsyncSlots) * int64(s.MaxContext) * int64(sh.KV) * kvb
		add("asynchronous rollout", w+kv+s.stepBytes(sh),
			"%s copy of the policy refreshed after each update, its KV cache of %d slots and its step activations, all beside the update (trainer.async)", what, s.AsyncSlots)
	}
	if s.BaseModel {
		// Evaluated after the policy: the KV cache is freed between the
		// two, the base model's step activations are its own.
		w, what := P*4, "fp32"
		if s.FrozenBF16 {
			w, what = P*2, "bf16 (when its folder is bf16)"
		}
		add("base model", w+s.stepBytes(sh), "a second policy, frozen, %s, and its rollout step activations", what)
	}
	if s.Critic {
		C := sh.arena(false, true)
		csb := int64(4)
		if s.CriticStateBF16 {
			csb = 2
		}
		st, sc, how := s.moments(C, csb)
		dpScratch += sc
		cg, _ := s.grads(sh, C, false, true)
		add("critic", C*4+cg+st+s.forwardBytes(sh, T, sh.savedLayers(T, s.Recompute, s.SaveBytes), true),
			"value model: fp32 weights, gradients, AdamW%s, training activations at %d tokens", how, T)
	}
	if s.RolloutSlots > 0 {
		// Mixed precision stores the cache in bf16 (cuda AllocCompute, which
		// model.NewKVCache uses); attention widens it and accumulates in fp32.
		// So does a bf16 rollout copy's on the CPU (its bf16 products).
		kvb, kvt := int64(4), "fp32"
		if mixed {
			kvb, kvt = 2, "bf16"
		} else if s.RolloutBF16 {
			kvb, kvt = 2, "bf16, the rollout copy's"
		}
		kv := 2 * int64(sh.L) * int64(s.RolloutSlots) * int64(s.MaxContext) * int64(sh.KV) * kvb
		add("KV cache", kv, "%d slots × %d positions × %d layers × K and V × %d, %s", s.RolloutSlots, s.MaxContext, sh.L, sh.KV, kvt)
		if s.EvalSlots > 0 && s.EvalOwnCache {
			add("evaluation KV cache", kv/int64(s.RolloutSlots)*int64(s.EvalSlots),
				"%d slots of held-out questions, beside the rollout's cache while an evaluation runs", s.EvalSlots)
		}
		add("rollout step activations", s.stepBytes(sh),
			"%d tokens per step (each group's leader prefills while the rest decode%s), logits of %d rows", s.stepTokens(), s.stepDetail(), s.stepRows())
	}
	// Activations are float32, except under mixed precision the residual
	// stream and the layers' matmul and attention tensors (actBytes). The
	// KV cache and a frozen reference are bf16 under it too. A long batch
	// runs in groups of sequences (forwardBytes).
	if s.Train {
		saved := sh.savedLayers(T, s.Recompute, s.SaveBytes)
		what := "every layer's activations saved"
		switch {
		case s.Recompute:
			what = "recomputation: residuals only"
		case saved == 0:
			what = fmt.Sprintf("recomputation (on by itself: saved layers would exceed %.3g GiB)", float64(max(s.SaveBytes, autoRecomputeBytes))/GiB)
		case saved < sh.L:
			what = fmt.Sprintf("%d of %d layers' activations saved within %.3g GiB, the rest recomputed", saved, sh.L, float64(max(s.SaveBytes, autoRecomputeBytes))/GiB)
		}
		acts := s.forwardBytes(sh, T, saved, true)
		if lg := s.keptLogits(sh, T); lg > 0 {
			acts += lg
			what += fmt.Sprintf(", and the LM head's %d × %d logits", T, sh.V)
		}
		add("activations", acts, "training micro-batch of %d tokens, %s%s%s", T, what, s.groupDetail(sh, T, saved, true), s.residDetail())
		if s.OptimOffload && s.Device == "cpu" {
			phase("update", "given back before the optimizer step (trainer.optim_offload)")
		}
	} else if T > 0 {
		add("activations", s.forwardBytes(sh, T, 0, false), "scoring forward of %d tokens%s%s", T, s.groupDetail(sh, T, 0, false), s.residDetail())
	}
	if it, ok := s.dpItem(dpScratch); ok && s.Train {
		p.Items = append(p.Items, it)
	}
	if s.Device == "cuda" {
		tt, bt := max(T, s.stepTokens()), 0
		if s.Train || s.Critic {
			bt = T // a backward's rows: the micro-batch, or one group of it
			if g := s.groupRows(sh, T, sh.savedLayers(T, s.Recompute, s.SaveBytes), true); g > 0 {
				bt = g
			}
		}
		add("device scratch", s.cudaScratch(sh, tt, bt), "the CUDA device's own buffers at %d tokens: cuBLAS workspace, LM-head logit chunks, bf16-rounded matmul operands", tt)
	}
	add("workspace", s.workspace(sh, T), "%s", s.workspaceDetail())
	return p, nil
}

// actBytes is the bytes of an activation arena (shape.acts) of T tokens.
// Under mixed precision the residual stream (every residual kept: L+1, or
// two alternating without a backward) and each layer's tensors that feed a
// matmul or attention (model.ActivationLayout: xmid, ln1, qkv, att, ln2, gu,
// act, Qwen3's qkraw; every layer's when saved, one set otherwise) are a
// second arena in the CUDA device's compute storage, bf16
// (model.StoreCompute, activations.go): 2 bytes a value, 4 for the rest
// (statistics, the final norm, the head's outputs, backward scratch).
func (s Settings) actBytes(sh shape, T int, nsaved int, train bool) int64 {
	c := model.ActivationCut{T: T, Residuals: 2, Saved: nsaved}
	if train || sh.L+1 < 2 {
		c.Residuals = sh.L + 1
	}
	if train {
		c.BackwardRows = T
	}
	return s.bytesOf(sh.arenaVals(c, s.gradViews()))
}

func (s Settings) residDetail() string {
	if s.Precision != "bf16-mixed" {
		return ""
	}
	return " (residual stream and layer activations in bf16, statistics and gradients fp32)"
}

// stepBytes is what one rollout step's forward holds: the activations of
// its tokens and the logits of its rows.
func (s Settings) stepBytes(sh shape) int64 {
	if s.RolloutSlots == 0 {
		return 0
	}
	return s.actBytes(sh, s.stepTokens(), 0, false) + int64(s.stepRows())*int64(sh.V)*4
}

// stepTokens bounds the tokens of one rollout step: every group's leader
// prefills its prompt while every other slot decodes one token, unless a
// prefill budget feeds fewer.
func (s Settings) stepTokens() int {
	if s.RolloutSlots == 0 {
		return 0
	}
	g := max(s.GroupSize, 1)
	leaders := (s.RolloutSlots + g - 1) / g
	// An evaluation's questions are groups of one: all its slots prefill.
	t := max(leaders*max(s.MaxPromptTokens, 1)+s.RolloutSlots, s.EvalSlots*(max(s.MaxPromptTokens, 1)+1))
	t = max(t, s.RolloutSlots*s.RewriteTokens) // step mode: every slot refilling a rewritten context
	if s.PrefillTokens > 0 {
		// The budget holds every decode (one token a slot) and feeds
		// prompts in pieces within it (rl's scheduler).
		t = min(t, max(s.PrefillTokens, s.stepRows()))
	}
	return t
}

// stepRows are the rows of a step's logits: one a slot.
func (s Settings) stepRows() int {
	if s.RolloutSlots == 0 {
		return 0
	}
	return max(s.RolloutSlots, s.EvalSlots)
}

func (s Settings) stepDetail() string {
	rewrite := ""
	if s.RewriteTokens > 0 {
		rewrite = fmt.Sprintf("; step mode: every slot may refill a rewritten context of up to %d", s.RewriteTokens)
	}
	if s.EvalSlots == 0 {
		return rewrite
	}
	if s.PrefillTokens > 0 {
		return fmt.Sprintf("%s; an evaluation's %d slots prefill within prefill_tokens", rewrite, s.EvalSlots)
	}
	return fmt.Sprintf("%s; an evaluation's %d slots all prefill", rewrite, s.EvalSlots)
}

// workspace is what the device needs beside the arenas: on the CPU the LM
// head's vocabulary chunks and each worker's attention scores; on CUDA the
// context, the loaded kernels and cuBLAS's workspace.
func (s Settings) workspace(sh shape, T int) int64 {
	if s.Device == "cuda" {
		return 512 << 20
	}
	const headRows, headChunk, attnBlock = 256, 4096, 64
	threads := int64(max(s.Threads, 1))
	return int64(headRows*headChunk)*4*2 + threads*2*attnBlock*int64(T)*4
}

// cudaScratch is what the CUDA device allocates for itself beside the
// arenas (cuMemAlloc'd, so in the emulator's allocation log), sized for a
// forward over T tokens and a backward over bt rows (0: none; a grouped
// backward runs its head and layers one group at a time): cuBLAS's
// workspace (cuda's blasWorkspaceBytes on Hopper), the LM head's float32
// logit chunk and its per-token statistics, attention's backward row
// sums, and in mixed precision the bf16 operands the device rounds for
// the matmuls: the head's input rows, rounded once per block ("head-h"),
// the backward's logit-gradient chunk ("head-grad"), and "mixed-a" and
// "mixed-b", the float32 operands rounded on their way into one matmul:
// the decode step's gathered rows for their logits and a critic's value
// head input; and with the tensor-core attention (head size 64 or 128)
// the backward's dO in bf16. The layers' activations and gradients are
// bf16 already.
func (s Settings) cudaScratch(sh shape, T, bt int) int64 {
	// CUDA's fused LM head computes its logits block by block.
	geometry := func(T int) (rows, chunk int64) {
		r, c := model.HeadBlock(T, sh.V, model.HeadLogitBudget, model.HeadMaxRows)
		return int64(r), int64(c)
	}
	t, b, C := int64(T), int64(bt), int64(sh.C)
	rows, chunk := geometry(T)
	n := blasWorkspace + rows*chunk*4 + 8*t*4 + int64(sh.NH)*t*4
	if bt > 0 {
		// RMSNorm's backward: a row of weight gradients for each of its
		// blocks (two a multiprocessor), added in block order.
		n += min(b, 2*maxSMs) * C * 4
	}
	if s.Precision == "bf16-mixed" {
		n += rows * C * 2
		if bt > 0 {
			br, bc := geometry(bt)
			n += br * bc * 2
		}
		a, bb := int64(s.stepRows())*C, int64(0)
		if s.Critic {
			a, bb = max(a, t*C), b*C
		}
		n += (a + bb) * 2
		if bt > 0 && (sh.HS == 64 || sh.HS == 128) {
			n += b * int64(sh.Q) * 2 // the tensor-core attention backward's bf16 dO
		}
	}
	return n
}

// maxSMs bounds a GPU's multiprocessors (132 on an H100 or H200, 148 on a
// B200), which the plan does not know when it sizes per-block buffers.
const maxSMs = 160

// blasWorkspace is the cuBLAS workspace the CUDA device allocates when it
// opens on a Hopper GPU (4 MiB on older ones).
const blasWorkspace = 32 << 20

func (s Settings) workspaceDetail() string {
	if s.Device == "cuda" {
		return "CUDA context, kernels and cuBLAS workspace (estimate)"
	}
	return "LM-head vocabulary chunks and per-thread attention scores"
}

// Print writes the plan, one item a line in GiB, then the total against
// the capacity and whether it fits.
func (p *Plan) Print(w io.Writer) {
	s := p.Settings
	per := ""
	if s.Ranks > 1 {
		per = fmt.Sprintf(", per rank of %d", s.Ranks)
		switch s.stage() {
		case 1:
			per += " with ZeRO-1 (optimizer state sharded)"
		case 2:
			per += " with ZeRO-2 (optimizer state and gradients sharded)"
		}
	}
	fmt.Fprintf(w, "memory plan: %s on %s (%s)%s\n", p.Model, s.Device, s.Precision, per)
	for _, it := range p.Items {
		fmt.Fprintf(w, "  %-26s %9.3f GiB  %s\n", it.Name, float64(it.Bytes)/GiB, it.Detail)
	}
	if s.Capacity > 0 {
		verdict := "fits"
		if !p.Fits() {
			verdict = "does NOT fit"
		}
		fmt.Fprintf(w, "  %-26s %9.3f GiB  of %.3f GiB on the device: %s\n", "total", float64(p.Total())/GiB, float64(s.Capacity)/GiB, verdict)
	} else {
		fmt.Fprintf(w, "  %-26s %9.3f GiB  (device capacity unknown)\n", "total", float64(p.Total())/GiB)
	}
}

// Largest returns the n largest items, largest first.
func (p *Plan) Largest(n int) []Item {
	items := append([]Item(nil), p.Items...)
	sort.SliceStable(items, func(i, j int) bool { return items[i].Bytes > items[j].Bytes })
	return items[:min(n, len(items))]
}

// Check prints nothing; it returns nil when the plan fits and otherwise an
// error naming the three largest items and the settings that would make
// the plan fit (see Advice).
func (p *Plan) Check(cfg *model.Config) error {
	if p.Fits() {
		return nil
	}
	var big []string
	for _, it := range p.Largest(3) {
		big = append(big, fmt.Sprintf("%s %.2f GiB", it.Name, float64(it.Bytes)/GiB))
	}
	msg := fmt.Sprintf("plan: the run needs %.2f GiB but the %s has %.2f GiB; largest: %s",
		float64(p.Total())/GiB, p.Settings.Device, float64(p.Settings.Capacity)/GiB, strings.Join(big, ", "))
	if adv := p.Advice(cfg); len(adv) > 0 {
		msg += "; to fit, set " + strings.Join(adv, "; or ")
	} else {
		msg += "; " + p.noFit(cfg)
	}
	return fmt.Errorf("%s", msg)
}

// noFit says what the smallest plan the knobs reach still needs.
func (p *Plan) noFit(cfg *model.Config) string {
	t := p.Settings
	t.Recompute = t.Train || t.Recompute
	t.MicroBatchTokens = min(t.MicroBatchTokens, max(t.MaxContext, 1))
	if t.RolloutSlots > 0 {
		t.RolloutSlots = max(t.GroupSize, 1)
		t.EvalSlots = min(t.EvalSlots, 1)
	}
	least := int64(0)
	if q, err := New(cfg, t); err == nil {
		least = q.Total()
	}
	var knobs []string
	for _, k := range []string{"micro_batch", "recompute", "slots"} {
		if p.Settings.key(k) != "" {
			knobs = append(knobs, p.Settings.key(k))
		}
	}
	return fmt.Sprintf("no value of %s makes it fit: even at their smallest the run needs %.2f GiB; use a larger device",
		strings.Join(knobs, ", "), float64(least)/GiB)
}

// keptLogits mirrors model.Model's keeps: the bytes of the LM head's
// logits that a training forward of T tokens keeps for its backward, on
// the CPU (the device that can), when every layer is saved and the logits
// fit what is left of the bound; else 0.
func (s Settings) keptLogits(sh shape, T int) int64 {
	bound := s.SaveBytes
	if bound <= 0 {
		bound = autoRecomputeBytes
	}
	lg := int64(T) * int64(sh.V) * 4
	if s.Device != "cpu" || !s.Train || !sh.saves(T, s.Recompute, s.SaveBytes) || int64(sh.L)*sh.layerActs(T)*4+lg > bound {
		return 0
	}
	return lg
}
