package rl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
)

// Asynchronous training (trainer.async). The rollout runs on a goroutine of
// its own, from a copy of the policy's weights, and never waits for the
// update: while the trainer scores and updates one batch, the rollout goes
// on sampling the next ones, and a trajectory whose tool is slow holds up
// no one. After each update the trainer refreshes the copy between two of
// the rollout's forward steps (AsyncRollout.refresh); a trajectory that
// spans the refresh goes on under the new weights, its later tokens
// stamped with the new version (Trajectory.Versions). Its keys and values
// computed before the refresh stay in the cache: the sampler's
// log-probabilities are those of what was sampled, so the loss's
// correction against them stays exact.
//
// Versions and the staleness bound. The policy's version is the number of
// RL steps done; a token's age when it is trained is the trainer's version
// then minus the version that sampled it. rollout.max_staleness K bounds
// every trained token's age by K:
//
//   - admission: the groups of prompt batch b (the batch the synchronous
//     trainer trains at step b) start once the rollout's weights are of
//     version b−K or later, as AReaL's controller admits requests;
//   - the trainer's batch at version v is the number of groups of batch v,
//     taken from the finished groups oldest first, and it waits for every
//     group admitted at version v−K or earlier ("due"), which step v+1 could
//     no longer train within the bound. A batch holds every due group,
//     even when there are more of them than the batch's size.
//
// With K = 0 the rollout of batch v starts after update v−1 and the trainer
// takes exactly batch v, in order, so that the run is the synchronous
// trainer's bit for bit (same weights, streams and, with
// rollout.deterministic, the same forward batches).
//
// The rollout's loss sees the versions through the sampler's
// log-probabilities: with K > 0 the config must use the decoupled PPO
// objective (its behaviour policy is the sampler) or a rollout correction
// (its importance weights against the sampler), per token.
//
// A checkpoint keeps AsyncState: the source's position before the oldest
// batch with an untrained group, and which of that batch's and later
// batches' groups were trained. Trajectories in flight are dropped and
// regenerated on resume, from the same streams (the batch's seed), under
// the resumed version: the staleness accounting goes on where it stopped.

// AsyncConfig is the trainer section's switch for asynchronous training;
// its bound and threads are rollout.max_staleness and rollout.threads.
type AsyncConfig struct {
	Async bool `yaml:"async" help:"asynchronous training: the rollout samples from a copy of the weights on its own goroutine, refreshed after each update, while the trainer updates (bounded by rollout.max_staleness)"`
}

// ValidateAsync reports settings that asynchronous training cannot run
// with: an external rollout (its agents drive the policy itself), a
// greedy baseline (it would need the copy's weights of every version),
// and, with K > 0, a loss that does not see the sampler's log-probs.
func (c *TrainerConfig) ValidateAsync(a AsyncConfig) error {
	if !a.Async {
		return nil
	}
	if c.Rollout.Mode == "external" {
		return errors.New("trainer.async needs the builtin rollout: rollout.mode external serves the policy itself")
	}
	if c.Needs().Baseline {
		return fmt.Errorf("trainer.async: algorithm.adv_estimator %s needs a greedy rollout from the weights that sampled each batch", c.Algorithm.Estimator)
	}
	rc := &c.Algorithm.RolloutCorrection
	if c.Rollout.MaxStaleness > 0 && c.Actor.PolicyLoss != "decoupled" && !rc.active() && !rc.BypassMode {
		return fmt.Errorf("trainer.async with rollout.max_staleness %d trains on tokens sampled by older weights: set actor.policy_loss decoupled, or a rollout correction (algorithm.rollout_correction.rollout_is or bypass_mode)", c.Rollout.MaxStaleness)
	}
	return nil
}

// AsyncSource is where an asynchronous trainer's steps take their
// trajectories, and whom the trainer hands each update's weights: the
// AsyncRollout of this process (StartAsync), or the rollout ranks of a
// data-parallel run (rl/dp's RemoteRollout).
type AsyncSource interface {
	// Take waits for the trainer's batch at version v and returns its
	// trajectories, groups in order of their prompts (each trajectory's
	// Group its group's place in the batch), with the staleness metrics.
	Take(ctx context.Context, v int) ([]*Trajectory, Metrics, error)
	// Refresh hands the rollout the policy's weights of version v, the
	// trainer's after v updates.
	Refresh(policy *model.Model, v int) error
}

// BatchSource is where an asynchronous rollout takes its prompts: the
// batches the synchronous trainer would be given, in order.
type BatchSource interface {
	Next() []data.Sample
	State() data.SamplerState
}

// AsyncState is what a checkpoint keeps of an asynchronous rollout.
type AsyncState struct {
	// Sampler is the source's position before batch First.
	Sampler data.SamplerState `json:"sampler"`
	// First is the oldest batch with a group not yet trained on.
	First int `json:"first_batch"`
	// Trained lists the groups of batch First and later already trained
	// on, as [batch, prompt] pairs.
	Trained [][2]int `json:"trained"`
}

// groupKey names a group: prompt i of batch b.
type groupKey struct{ b, i int }

// asyncGroup is one prompt's N trajectories in the rollout.
type asyncGroup struct {
	key   groupKey
	start int32 // the rollout's version at admission: no token of the group is older
	trajs []*Trajectory
	left  int // trajectories not yet finished
}

// asyncBatch is a prompt batch taken from the source and not yet trained.
type asyncBatch struct {
	prompts []data.Sample
	before  data.SamplerState // the source before it
	left    int               // groups not yet trained on
}

// AsyncRollout is the rollout of asynchronous training: a streaming run of
// the scheduler over the copy's weights, the prompt batches it took, the
// groups in flight and finished, and the trained ones.
type AsyncRollout struct {
	roll *Rollout
	copy *model.Model // the weights the rollout samples from
	src  BatchSource
	k    int
	// perStep is the groups of a step's batch (data.train_batch_size); an
	// epoch's short last batch and the due groups make a batch differ.
	perStep int

	stepMu sync.Mutex // held around each forward step of the rollout, and by a refresh

	mu      sync.Mutex
	changed *sync.Cond // a group finished, or the rollout stopped
	version int32      // of the copy's weights; written under stepMu and mu
	batches map[int]*asyncBatch
	pulled  int // batches taken from the source
	next    groupKey
	trained map[groupKey]bool // of open batches
	groups  map[groupKey]*asyncGroup
	owner   map[*Trajectory]*asyncGroup
	err     error // why the rollout stopped
	wakeCh  chan struct{}
	cancel  context.CancelFunc
	stopped chan struct{}
}

// StartAsync starts the asynchronous rollout of t at its current version:
// a copy of t.Policy on dev (CPU threads of its own, or a second stream
// of the GPU), sampling in rollout.dtype (in mixed precision when the
// policy computes so), over slots sequences of maxLen positions, taking
// prompt batches of perStep prompts from src. resume, when not nil, is a
// checkpoint's state, src already restored to its Sampler. The trainer's
// steps then take their trajectories from it (Trainer.Step with no
// prompts); Close stops it.
func (t *Trainer) StartAsync(ctx context.Context, dev model.Device, slots, maxLen, perStep int, src BatchSource, resume *AsyncState) (*AsyncRollout, error) {
	if t.Rollout == nil {
		return nil, errors.New("rl: asynchronous training needs the builtin rollout")
	}
	roll := *t.Rollout
	a, err := StartAsyncRollout(ctx, &roll, t.Policy, t.step, dev, slots, maxLen, perStep, src, resume)
	if err != nil {
		return nil, err
	}
	t.SetAsync(a)
	return a, nil
}

// SetAsync makes the trainer's steps take their trajectories from src
// and hand it each update's weights; the trainer's own rollout, and its
// bf16 copy, go unused.
func (t *Trainer) SetAsync(src AsyncSource) {
	t.rolloutCopy = nil
	t.Async = src
}

// StartAsyncRollout starts roll streaming from a copy of policy's weights
// of version on dev, as StartAsync does for a trainer; a data-parallel
// rollout rank (rl/dp's ServeRollout) calls it with the policy it receives
// the trainer's weights in. roll.Policy is replaced by the copy's.
func StartAsyncRollout(ctx context.Context, roll *Rollout, policy *model.Model, version int, dev model.Device, slots, maxLen, perStep int, src BatchSource, resume *AsyncState) (*AsyncRollout, error) {
	opt := model.LoadOptions{Frozen: true}
	if roll.Cfg.DType == "bfloat16" {
		opt.DType, opt.BF16Products = "bfloat16", true
	}
	// A policy in mixed precision (the CUDA device) samples from the bf16
	// copy of its matrices and its float32 norms and biases: the rollout's
	// copy is float32 weights in mixed precision too, with their own bf16
	// copy, so that it samples what the policy would, bit for bit (a frozen
	// bf16 copy would round the norms and biases too).
	mp, mixed := policy.Dev.(model.MixedPrecision)
	mixed = mixed && mp.Mixed()
	if mixed {
		opt.DType, opt.BF16Products = "float32", false
	}
	cp, err := policy.CloneOn(dev, opt)
	if err != nil {
		return nil, fmt.Errorf("rl: the asynchronous rollout's copy of the policy: %w", err)
	}
	if mixed {
		cmp, ok := dev.(model.MixedPrecision)
		if !ok {
			return nil, fmt.Errorf("rl: the policy computes in mixed precision and the rollout's device %s cannot", dev.Name())
		}
		cmp.UseBF16(cp.Params)
	}
	roll.Policy = NewModelPolicy(cp, slots, maxLen)
	return startAsyncRollout(ctx, roll, cp, version, roll.Cfg.MaxStaleness, perStep, src, resume), nil
}

// startAsyncRollout starts roll streaming at version: its policy samples
// from cp (nil: a policy with no weights to refresh, in tests).
func startAsyncRollout(ctx context.Context, roll *Rollout, cp *model.Model, version, k, perStep int, src BatchSource, resume *AsyncState) *AsyncRollout {
	a := &AsyncRollout{roll: roll, copy: cp, src: src, k: k, perStep: perStep, version: int32(version),
		batches: map[int]*asyncBatch{}, trained: map[groupKey]bool{}, groups: map[groupKey]*asyncGroup{},
		owner: map[*Trajectory]*asyncGroup{}, wakeCh: make(chan struct{}, 1), stopped: make(chan struct{})}
	a.changed = sync.NewCond(&a.mu)
	if resume != nil {
		a.pulled, a.next = resume.First, groupKey{b: resume.First}
		for _, k := range resume.Trained {
			a.trained[groupKey{k[0], k[1]}] = true
		}
	}
	ctx, a.cancel = context.WithCancel(ctx)
	x := roll.newRun(ctx, roll.Policy.Slots())
	x.feed = a
	go func() {
		err := x.loop()
		a.mu.Lock()
		if err == nil || ctx.Err() != nil {
			err = errAsyncStopped
		}
		a.err = err
		a.changed.Broadcast()
		a.mu.Unlock()
		close(a.stopped)
	}()
	return a
}

var errAsyncStopped = errors.New("rl: the asynchronous rollout was stopped")

// Close stops the rollout and waits for it; trajectories in flight are
// dropped.
func (a *AsyncRollout) Close() {
	a.cancel()
	<-a.stopped
}

// more is the feed's admission: it submits the groups of every batch up to
// version+K not yet trained on, taking batches from the source as needed.
func (a *AsyncRollout) more(q *scheduler[*trajState]) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.next.b <= int(a.version)+a.k {
		b := a.next.b
		for a.pulled <= b {
			before := a.src.State()
			a.batches[a.pulled] = &asyncBatch{prompts: a.src.Next(), before: before}
			a.pulled++
		}
		batch := a.batches[b]
		if a.next.i == 0 {
			batch.left = len(batch.prompts)
		}
		if a.next.i >= len(batch.prompts) {
			if batch.left == 0 { // every group trained before a resume
				a.forget(b)
			}
			a.next = groupKey{b: b + 1}
			continue
		}
		key := a.next
		a.next.i++
		if a.trained[key] { // trained before a resume
			batch.left--
			continue
		}
		states, err := a.roll.newGroup(b, key.i, batch.prompts[key.i])
		if err != nil {
			return false, err
		}
		g := &asyncGroup{key: key, start: a.version, left: len(states)}
		for _, s := range states {
			g.trajs = append(g.trajs, s.t)
			a.owner[s.t] = g
			q.submit(s)
		}
		a.groups[key] = g
	}
	return true, nil
}

func (a *AsyncRollout) wake() <-chan struct{} { return a.wakeCh }

func (a *AsyncRollout) stepBegin() int32 {
	a.stepMu.Lock()
	return a.version // written only while stepMu is held too
}

func (a *AsyncRollout) stepEnd() { a.stepMu.Unlock() }

func (a *AsyncRollout) done(s *trajState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.owner[s.t]
	delete(a.owner, s.t)
	if g.left--; g.left == 0 {
		a.changed.Broadcast()
	}
}

// Refresh copies the policy's weights of version v into the rollout's
// copy between two of its forward steps, and lets the next batches start.
func (a *AsyncRollout) Refresh(policy *model.Model, v int) error {
	a.stepMu.Lock()
	var err error
	if a.copy != nil {
		// Devices that queue work (CUDA: a stream each) finish the update
		// before the copy reads it, and the copy before the next update
		// writes the weights again.
		if err = policy.Dev.Sync(); err == nil {
			if err = a.copy.CopyWeightsFrom(policy); err == nil {
				err = a.copy.Dev.Sync()
			}
		}
	}
	a.mu.Lock()
	a.version = int32(v)
	a.mu.Unlock()
	a.stepMu.Unlock()
	select {
	case a.wakeCh <- struct{}{}:
	default:
	}
	return err
}

// Take waits for the trainer's batch at version v and returns its
// trajectories, groups in order of their prompts (each trajectory's Group
// its group's place in the batch), with the staleness metrics: AgeMetrics,
// async/groups, async/due (groups the bound forced into this batch) and
// async/buffered (finished groups left for later steps).
func (a *AsyncRollout) Take(ctx context.Context, v int) ([]*Trajectory, Metrics, error) {
	stop := context.AfterFunc(ctx, func() {
		a.mu.Lock()
		a.changed.Broadcast()
		a.mu.Unlock()
	})
	defer stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	want := a.perStep
	var picked []*asyncGroup
	due := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if a.err != nil {
			return nil, nil, a.err
		}
		var finished []*asyncGroup
		waiting, flying := false, false
		picked, due = picked[:0], 0
		for _, g := range a.groups {
			isDue := int(g.start) <= v-a.k
			flying = flying || g.left > 0
			switch {
			case isDue && g.left > 0:
				waiting = true
			case isDue:
				picked = append(picked, g)
				due++
			case g.left == 0:
				finished = append(finished, g)
			}
		}
		slices.SortFunc(finished, func(x, y *asyncGroup) int {
			if x.start != y.start {
				return int(x.start - y.start)
			}
			return keyOrder(x.key, y.key)
		})
		for _, g := range finished {
			if len(picked) >= want {
				break
			}
			picked = append(picked, g)
		}
		// Exhausted: every group the bound admits has started and finished
		// (a short batch at an epoch's end, the last steps of a resume).
		exhausted := !flying && a.next.b > int(a.version)+a.k
		if !waiting && (len(picked) >= want || exhausted && len(picked) > 0) {
			break
		}
		if exhausted {
			return nil, nil, fmt.Errorf("rl: asynchronous rollout: nothing left to train at version %d within rollout.max_staleness %d", v, a.k)
		}
		a.changed.Wait()
	}
	slices.SortFunc(picked, func(x, y *asyncGroup) int { return keyOrder(x.key, y.key) })
	var trajs []*Trajectory
	for i, g := range picked {
		for _, tr := range g.trajs {
			tr.Group = i
			trajs = append(trajs, tr)
		}
		delete(a.groups, g.key)
		a.trained[g.key] = true
		b := a.batches[g.key.b]
		if b.left--; b.left == 0 {
			a.forget(g.key.b)
		}
	}
	m := AgeMetrics(trajs, v, a.k)
	m["async/groups"] = float64(len(picked))
	m["async/due"] = float64(due)
	buffered := 0
	for _, g := range a.groups {
		if g.left == 0 {
			buffered++
		}
	}
	m["async/buffered"] = float64(buffered)
	return trajs, m, nil
}

// forget drops a batch whose groups have all been trained on, and their
// trained marks.
func (a *AsyncRollout) forget(b int) {
	for i := range a.batches[b].prompts {
		delete(a.trained, groupKey{b, i})
	}
	delete(a.batches, b)
}

func keyOrder(x, y groupKey) int {
	if x.b != y.b {
		return x.b - y.b
	}
	return x.i - y.i
}

// AgeMetrics are the ages of trajs' action tokens at version v under the
// bound k: async/age_mean, async/age_max and async/age_0..k (the share of
// each age), async/partial (the share of trajectories sampled under more
// than one version) and async/version.
func AgeMetrics(trajs []*Trajectory, v, k int) Metrics {
	m := Metrics{}
	hist := make([]float64, k+1)
	var n, sum, most, partial float64
	for _, tr := range trajs {
		for j, ver := range tr.Versions {
			age := v - int(ver)
			sum += float64(age)
			most = max(most, float64(age))
			if age >= 0 && age <= k {
				hist[age]++
			}
			n++
			if j > 0 && ver != tr.Versions[0] {
				partial++
				break
			}
		}
	}
	m["async/age_mean"] = sum / max(n, 1)
	m["async/age_max"] = most
	for age, c := range hist {
		m[fmt.Sprintf("async/age_%d", age)] = c / max(n, 1)
	}
	m["async/partial"] = partial / float64(max(len(trajs), 1))
	m["async/version"] = float64(v)
	return m
}

// State is the rollout's part of a checkpoint taken after the trainer's
// step: the source's position before the oldest batch with an untrained
// group, and the trained groups from there on.
func (a *AsyncRollout) State() AsyncState {
	a.mu.Lock()
	defer a.mu.Unlock()
	first := a.pulled
	for b := range a.batches {
		first = min(first, b)
	}
	st := AsyncState{First: first}
	if b, ok := a.batches[first]; ok {
		st.Sampler = b.before
	} else {
		st.Sampler = a.src.State()
	}
	for k := range a.trained {
		if k.b >= first {
			st.Trained = append(st.Trained, [2]int{k.b, k.i})
		}
	}
	slices.SortFunc(st.Trained, func(x, y [2]int) int { return keyOrder(groupKey{x[0], x[1]}, groupKey{y[0], y[1]}) })
	return st
}
