package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bench runs the table's rows as cmd/train and cmd/eval subprocesses.
//
// Out holds, per warm start, warm/KEY/seedS/ (the SFT run, when there is
// one, and warm.json: the warm start's and Naive RAG's held-out results and
// its validation EM, the curves' step 0) and, per RL row,
// rows/NAME/seedS/ (run/: cmd/train's run folder, train.log, result.json).
// A result file is written last, so its presence means the run finished.
type Bench struct {
	Size Size
	Out  string
	Jobs int
	// Threads is each run's thread count (GOMAXPROCS of cmd/train and
	// cmd/eval; 0: every core). The 1.6M-parameter policy's products are
	// too small to keep many cores busy, so on a machine with many of them
	// runs side by side, a few cores each, finish the table sooner. On 2
	// cores they do not: two single-thread runs side by side share the
	// memory bandwidth and took as long as the two one after the other on
	// both cores (learning/notes.md).
	Threads int
	Seed    int // run only this seed (0: 1..Size.Seeds)
	// CPU is the kernel tier every run is made at (R1GO_CPU of cmd/train
	// and cmd/eval): before Main, the one asked for ("": the runs folder's,
	// or this machine's best); after, the one pinCPU settled on.
	CPU string
	Log io.Writer

	bin    string // folder of the train and eval binaries
	commit string // the code the binaries are built from: checkout()
	logMu  sync.Mutex
	warmMu sync.Mutex
	warms  map[string]*warmOnce // warm starts, and their policies made again
}

type warmOnce struct {
	once sync.Once
	res  *WarmResult
	err  error
}

type job struct {
	row  Row
	seed int
}

// Run trains every RL row and every warm start the rows need, seed 1 of all
// rows before seed 2, so that a table stopped early has every row once.
// Runs whose result exists are skipped. A failed run is logged beside its
// folder (error.txt) and the others go on; the error lists the failures.
func (b *Bench) Run(ctx context.Context, rows []Row) error {
	if err := b.build(ctx); err != nil {
		return err
	}
	var jobs []job
	for seed := 1; seed <= b.Size.Seeds; seed++ {
		for _, r := range rows {
			if r.Pending == "" && (b.Seed == 0 || b.Seed == seed) {
				jobs = append(jobs, job{r, seed})
			}
		}
	}
	ch := make(chan job)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range max(b.Jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				if err := b.runJob(ctx, j); err != nil {
					b.logf("FAILED %s, seed %d: %v", j.row.Name, j.seed, err)
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s, seed %d: %w", j.row.Name, j.seed, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		ch <- j
	}
	close(ch)
	wg.Wait()
	return errors.Join(append(errs, ctx.Err())...)
}

func (b *Bench) runJob(ctx context.Context, j job) error {
	warm, err := b.warm(ctx, j.row, j.seed)
	if err != nil || j.row.Kind != RL {
		return err
	}
	dir := b.rowDir(j.row, j.seed)
	if exists(filepath.Join(dir, "result.json")) {
		return nil
	}
	release, ok, err := claim(dir)
	if err != nil || !ok {
		if ok := err == nil; ok {
			b.logf("skip %s, seed %d: another runner has it (%s)", j.row.Name, j.seed, filepath.Join(dir, "claim"))
		}
		return err
	}
	defer release()
	if err := b.policy(ctx, j.row, j.seed, warm); err != nil {
		return err
	}
	err = b.trainRow(ctx, j.row, j.seed, warm, dir)
	if err != nil && ctx.Err() == nil {
		os.WriteFile(filepath.Join(dir, "error.txt"), []byte(err.Error()+"\n"), 0o644)
	}
	return err
}

// claim marks dir as taken by this process, so that two runners on one
// -out (say, two -rows pieces started side by side) do not train the same
// run; a claim whose process is gone is taken over.
func claim(dir string) (release func(), ok bool, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	path := filepath.Join(dir, "claim")
	for range 2 {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
			return func() { os.Remove(path) }, true, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, false, err
		}
		var pid int
		data, _ := os.ReadFile(path)
		if _, err := fmt.Sscan(string(data), &pid); err == nil && pid > 0 && alive(pid) {
			return nil, false, nil
		}
		os.Remove(path) // its process is gone
	}
	return nil, false, fmt.Errorf("%s: cannot claim", path)
}

// alive says whether process pid exists (signal 0 checks without sending;
// where there is no such signal, a claim is taken as abandoned).
func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

// build compiles cmd/train and cmd/eval once, from the module this command
// runs in.
func (b *Bench) build(ctx context.Context) error {
	b.bin = filepath.Join(b.Out, "bin")
	b.commit = checkout(b.Out)
	for _, c := range []string{"train", "eval"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(b.bin, c), "./cmd/"+c)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/%s: %v\n%s", c, err, out)
		}
	}
	return nil
}

// split parts a row's overrides into the warm start's (sft.*) and the RL
// run's.
func split(args []string) (sft, rl []string) {
	for _, a := range args {
		if strings.HasPrefix(a, "sft.") {
			sft = append(sft, a)
		} else {
			rl = append(rl, a)
		}
	}
	return sft, rl
}

// worldArgs are the settings every train and eval invocation shares: the
// synthetic world (whose test and validation splits depend on its size).
func (b *Bench) worldArgs() []string {
	return []string{fmt.Sprintf("data.synth_eval=%d", b.Size.SynthEval)}
}

// once returns the entry of key, which the runs sharing a warm start share,
// so that they make it (or make its policy again) once.
func (b *Bench) once(key string) *warmOnce {
	b.warmMu.Lock()
	defer b.warmMu.Unlock()
	if b.warms == nil {
		b.warms = map[string]*warmOnce{}
	}
	if b.warms[key] == nil {
		b.warms[key] = &warmOnce{}
	}
	return b.warms[key]
}

// warm returns the warm start of row's sft.* overrides and seed, training
// and evaluating it on first use (once per key for all the rows that share
// it).
func (b *Bench) warm(ctx context.Context, r Row, seed int) (*WarmResult, error) {
	sft, _ := split(r.Args)
	policy, seed := b.warmPolicy(sft, seed)
	id := b.warmDir(sft, seed)
	w := b.once(id)
	w.once.Do(func() { w.res, w.err = b.makeWarm(ctx, sft, seed, policy, id) })
	return w.res, w.err
}

// warmPolicy says where the warm start of sft.* overrides at seed comes
// from: a folder made before (Init, the same for every seed, or Seed1),
// or, when policy is empty, an SFT run. The seed returned is 0 when the
// warm start does not depend on it.
func (b *Bench) warmPolicy(sft []string, seed int) (policy string, _ int) {
	switch {
	case len(sft) == 0 && b.Size.Init != "":
		return b.Size.Init, 0
	case len(sft) == 0 && seed == 1 && b.Size.Seed1 != "":
		return b.Size.Seed1, 1
	}
	return "", seed
}

// sftSteps is the step count of SFT arguments: the last sft.steps=N.
func sftSteps(args []string) int {
	n := 0
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "sft.steps="); ok {
			if x, err := strconv.Atoi(v); err == nil {
				n = x
			}
		}
	}
	return n
}

func (b *Bench) warmDir(sft []string, seed int) string {
	return filepath.Join(b.Out, "warm", warmKey(sft), fmt.Sprintf("seed%d", seed))
}

func (b *Bench) makeWarm(ctx context.Context, sft []string, seed int, policy, dir string) (*WarmResult, error) {
	path := filepath.Join(dir, "warm.json")
	var res WarmResult
	if readJSON(path, &res) == nil {
		if res.SFTCommand != "" {
			// Its SFT ran here: the policy is in this folder, wherever
			// the folder is now (it may have been copied, without its
			// checkpoints, from another machine).
			res.Policy = sftPolicy(dir)
		}
		return &res, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	res.Policy = policy
	if policy == "" {
		args := b.sftArgs(sft, seed, dir)
		res.Policy = sftPolicy(dir)
		if err := b.sft(ctx, dir, args); err != nil {
			return nil, err
		}
		res.SFTCommand = "go run ./cmd/train " + strings.Join(args, " ")
		res.SFTWall = sftSeconds(filepath.Join(dir, "sft.log"))
	}
	// The SFT's time is its log's own figure, which a restarted runner
	// still reads; the evaluations' is this call's.
	start := time.Now()
	test := filepath.Join(dir, "test.json")
	// cmd/eval's flags come before its key=value arguments.
	args := append([]string{"-model", res.Policy, "-output", test}, b.worldArgs()...)
	args = append(args, "baselines=[agent,naive-rag]")
	if err := b.command(ctx, filepath.Join(dir, "eval.log"), "eval", args...); err != nil {
		return nil, err
	}
	val := filepath.Join(dir, "val.json")
	vargs := append([]string{"-model", res.Policy, "-output", val}, b.worldArgs()...)
	vargs = append(vargs, "baselines=[agent]", "split=validation", fmt.Sprintf("data.val_size=%d", b.Size.ValSize))
	if err := b.command(ctx, filepath.Join(dir, "val.log"), "eval", vargs...); err != nil {
		return nil, err
	}
	var t, v map[string]Results
	if err := readJSON(test, &t); err != nil {
		return nil, err
	}
	if err := readJSON(val, &v); err != nil {
		return nil, err
	}
	res.Agent, res.NaiveRAG, res.ValEM = t["agent"], t["naive-rag"], v["agent"]["all"].EM
	res.EvalCommand = "go run ./cmd/eval " + strings.Join(args, " ")
	res.Machine, res.Commit = machine(), b.commit
	res.Wall = res.SFTWall + time.Since(start).Seconds()
	if err := writeJSON(path, res); err != nil {
		return nil, err
	}
	return &res, nil
}

// sftArgs is the cmd/train command line of the SFT of sft.* overrides at
// seed, run in dir.
func (b *Bench) sftArgs(sft []string, seed int, dir string) []string {
	args := append(b.worldArgs(), "trainer.total_training_steps=0", fmt.Sprintf("sft.steps=%d", b.Size.SFTSteps),
		fmt.Sprintf("model.seed=%d", seed), fmt.Sprintf("data.seed=%d", seed),
		"trainer.logger=[jsonl]", "trainer.overwrite=true", "trainer.default_local_dir="+filepath.Join(dir, "run"))
	if b.Size.Init != "" {
		args = append(args, "model.path="+b.Size.Init)
	}
	args = append(append(args, b.Size.Args...), sft...)
	if b.Size.SFTCap > 0 {
		args = append(args, fmt.Sprintf("sft.steps=%d", min(b.Size.SFTCap, sftSteps(args))))
	}
	return args
}

// sftPolicy is where the SFT run in a warm start's folder leaves its policy.
func sftPolicy(dir string) string { return filepath.Join(dir, "run", "sft") }

// sft runs the SFT of a warm start unless its policy is there: the SFT's
// own held-out evaluation is written last, so an SFT that got that far
// before its runner stopped is not run again.
func (b *Bench) sft(ctx context.Context, dir string, args []string) error {
	if exists(filepath.Join(sftPolicy(dir), "eval.json")) {
		return nil
	}
	b.logf("warm start %s: SFT", dir)
	return b.command(ctx, filepath.Join(dir, "sft.log"), "train", args...)
}

// policy makes sure the warm start an RL row of seed trains from is on
// disk. A runs folder keeps its results when its checkpoints are gone
// (copied from another machine, or committed): a missing SFT policy is
// trained again from its recorded settings, and its held-out results must
// match warm.json's exactly, or the rows trained from the first and the
// second would not share a warm start.
func (b *Bench) policy(ctx context.Context, r Row, seed int, warm *WarmResult) error {
	if warm.SFTCommand == "" || exists(filepath.Join(warm.Policy, "eval.json")) {
		return nil
	}
	sft, _ := split(r.Args)
	_, seed = b.warmPolicy(sft, seed)
	dir := b.warmDir(sft, seed)
	p := b.once(dir + " policy")
	p.once.Do(func() { p.err = b.regrow(ctx, sft, seed, dir, warm) })
	return p.err
}

func (b *Bench) regrow(ctx context.Context, sft []string, seed int, dir string, warm *WarmResult) error {
	b.logf("warm start %s: its policy is missing, training it again", dir)
	if err := b.sft(ctx, dir, b.sftArgs(sft, seed, dir)); err != nil {
		return err
	}
	check := filepath.Join(dir, "test-again.json")
	args := append([]string{"-model", warm.Policy, "-output", check}, b.worldArgs()...)
	if err := b.command(ctx, filepath.Join(dir, "eval-again.log"), "eval", append(args, "baselines=[agent]")...); err != nil {
		return err
	}
	var t map[string]Results
	if err := readJSON(check, &t); err != nil {
		return err
	}
	if !maps.Equal(t["agent"], warm.Agent) {
		return fmt.Errorf("warm start %s trained again scores held-out EM %.3f (%d questions), warm.json says %.3f (%d): "+
			"not the same policy (another CPU tier, thread count or commit); the rows trained from each would not share a warm start",
			dir, t["agent"]["all"].EM, t["agent"]["all"].N, warm.Agent["all"].EM, warm.Agent["all"].N)
	}
	return nil
}

// trainRow runs one RL row from its warm start and evaluates its
// best-validated checkpoint when that is not the last one.
func (b *Bench) trainRow(ctx context.Context, r Row, seed int, warm *WarmResult, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	os.Remove(filepath.Join(dir, "error.txt"))
	_, rowArgs := split(r.Args)
	run := filepath.Join(dir, "run")
	args := append(b.worldArgs(), "model.path="+warm.Policy, "sft.steps=0",
		fmt.Sprintf("data.seed=%d", seed), fmt.Sprintf("rollout.seed=%d", seed),
		fmt.Sprintf("data.val_size=%d", b.Size.ValSize),
		fmt.Sprintf("trainer.total_training_steps=%d", b.Size.Steps),
		fmt.Sprintf("trainer.test_freq=%d", b.Size.TestFreq), fmt.Sprintf("trainer.save_freq=%d", b.Size.TestFreq),
		"trainer.logger=[jsonl]", "trainer.overwrite=true", "trainer.default_local_dir="+run)
	args = append(append(args, b.Size.Args...), rowArgs...)
	b.logf("train %s, seed %d", r.Name, seed)
	start := time.Now()
	if err := b.command(ctx, filepath.Join(dir, "train.log"), "train", args...); err != nil {
		return err
	}
	res, err := readRun(run, warm.ValEM)
	if err != nil {
		return err
	}
	if res.Steps < b.Size.Steps {
		return fmt.Errorf("trained %d steps of %d (%s)", res.Steps, b.Size.Steps, filepath.Join(run, "metrics.jsonl"))
	}
	res.Command = "go run ./cmd/train " + strings.Join(args, " ")
	switch {
	case res.PeakStep == 0:
		res.Best = warm.Agent // RL never beat the warm start on validation
	case res.PeakStep == res.Steps:
		res.Best = res.Final
	default:
		out := filepath.Join(dir, "best.json")
		ckpt := filepath.Join(run, fmt.Sprintf("global_step_%d", res.PeakStep), "actor")
		eargs := append([]string{"-model", ckpt, "-output", out}, b.worldArgs()...)
		eargs = append(eargs, "baselines=[agent]")
		if err := b.command(ctx, filepath.Join(dir, "best.log"), "eval", eargs...); err != nil {
			return err
		}
		var m map[string]Results
		if err := readJSON(out, &m); err != nil {
			return err
		}
		res.Best = m["agent"]
	}
	res.Wall = time.Since(start).Seconds()
	res.Machine, res.Commit = machine(), b.commit
	pruneCheckpoints(run, res.PeakStep, res.Steps)
	return writeJSON(filepath.Join(dir, "result.json"), res)
}

var sftProgress = regexp.MustCompile(`sft step \d+/\d+: .*\((\d+) s\)`)

// sftSeconds reads the SFT's duration from its last progress line (the
// runner may have been restarted while that SFT went on), 0 if none.
func sftSeconds(logPath string) float64 {
	data, _ := os.ReadFile(logPath)
	m := sftProgress.FindAllSubmatch(data, -1)
	if len(m) == 0 {
		return 0
	}
	var s float64
	fmt.Sscan(string(m[len(m)-1][1]), &s)
	return s
}

// pruneCheckpoints removes the checkpoints of a finished run but the best
// and the last (which trainer.resume continues), so that the table's runs do
// not keep a few GB of them.
func pruneCheckpoints(run string, best, last int) {
	dirs, _ := filepath.Glob(filepath.Join(run, "global_step_*"))
	for _, d := range dirs {
		if b := filepath.Base(d); b != fmt.Sprintf("global_step_%d", best) && b != fmt.Sprintf("global_step_%d", last) {
			os.RemoveAll(d)
		}
	}
}

// command runs bin/name with args under the bench's context, its output
// to logPath; a failure quotes the log's last lines.
func (b *Bench) command(ctx context.Context, logPath, name string, args ...string) error {
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = os.Environ()
	if b.CPU != "" {
		cmd.Env = append(cmd.Env, "R1GO_CPU="+b.CPU)
	}
	if b.Threads > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(b.Threads))
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(logPath, 8))
	}
	return nil
}

func (b *Bench) logf(format string, args ...any) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	fmt.Fprintf(b.Log, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func (b *Bench) rowDir(r Row, seed int) string {
	return filepath.Join(b.Out, "rows", slug(r.Name), fmt.Sprintf("seed%d", seed))
}

var nonWord = regexp.MustCompile(`[^a-z0-9.+]+`)

// slug names a folder after a row or a warm start.
func slug(s string) string {
	return strings.Trim(nonWord.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// warmKey names the warm start of a set of sft.* overrides.
func warmKey(sft []string) string {
	if len(sft) == 0 {
		return "default"
	}
	s := append([]string(nil), sft...)
	sort.Strings(s)
	return slug(strings.Join(s, "_"))
}

func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
