package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A run folder belongs to one run. claimRunFolder makes sure of it before
// anything is written there:
//
//   - a folder that holds checkpoints is continued only with
//     trainer.resume=true, or wiped first with trainer.overwrite=true;
//     starting afresh over them would mix two runs' metrics and, at the
//     next save, replace the older run's policy without a word;
//   - run.lock (pid, host, start time) keeps a second trainer out while
//     this one runs; a lock whose process is dead on this host is stale
//     and is taken over, with a line saying so.
//
// The returned release removes the lock; it is safe to call more than once.

const lockName = "run.lock"

// lockInfo is run.lock's content.
type lockInfo struct {
	PID     int    `json:"pid"`
	Host    string `json:"host"`
	Started string `json:"started"`
}

// claimRunFolder creates dir (0755), takes its lock and checks that this
// run may write there. note receives one line per thing worth telling
// (a stale lock taken over, an overwrite).
func claimRunFolder(dir string, resume, overwrite bool, note func(string)) (release func(), err error) {
	if resume && overwrite {
		return nil, errors.New("trainer.resume=true and trainer.overwrite=true contradict each other: resume continues the run folder, overwrite wipes it")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	release, err = takeLock(dir, note)
	if err != nil {
		return nil, err
	}
	ckpts, err := checkpointSteps(dir)
	if err != nil {
		release()
		return nil, err
	}
	if len(ckpts) > 0 && !resume {
		if !overwrite {
			release()
			return nil, fmt.Errorf("run folder %s already holds checkpoints (global_step_%d is the latest): "+
				"continue it with trainer.resume=true, choose another folder with trainer.default_local_dir=DIR "+
				"(or trainer.experiment_name=NAME), or wipe it with trainer.overwrite=true", dir, ckpts[len(ckpts)-1])
		}
		if err := wipeRun(dir); err != nil {
			release()
			return nil, err
		}
		note(fmt.Sprintf("trainer.overwrite: removed the earlier run's %d checkpoints and metrics from %s", len(ckpts), dir))
	}
	return release, nil
}

// checkpointSteps lists the steps of the finished checkpoints in dir
// (global_step_N folders; .tmp leftovers of a crashed save do not count),
// in increasing order.
func checkpointSteps(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var steps []int
	for _, e := range ents {
		if n, ok := checkpointStep(e.Name()); ok && e.IsDir() {
			steps = append(steps, n)
		}
	}
	slices.Sort(steps)
	return steps, nil
}

func checkpointStep(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "global_step_")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == rest
}

// wipeRun removes what a run writes into its folder, and nothing else the
// user may keep there.
func wipeRun(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		_, isCkpt := checkpointStep(strings.TrimSuffix(name, ".tmp"))
		switch {
		case isCkpt, name == "latest_checkpointed_iteration.txt", name == "metrics.jsonl", name == "tensorboard",
			name == "sft", name == "eval.json", name == "training.png", name == "rollouts", name == "config.yaml":
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("trainer.overwrite: %w", err)
			}
		}
	}
	return nil
}

// takeLock creates dir/run.lock exclusively. An existing lock of a live
// process (or of another host, whose processes cannot be checked) is an
// error naming it; one of a dead process on this host is taken over.
func takeLock(dir string, note func(string)) (func(), error) {
	path := filepath.Join(dir, lockName)
	host, _ := os.Hostname()
	me := lockInfo{PID: os.Getpid(), Host: host, Started: time.Now().UTC().Format(time.RFC3339)}
	body, _ := json.Marshal(me)
	for attempt := 0; attempt < 2; attempt++ {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := f.Write(append(body, '\n'))
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(path)
				return nil, fmt.Errorf("run folder lock %s: %w", path, werr)
			}
			released := false
			return func() {
				if !released {
					released = true
					removeOwnLock(path, me)
				}
			}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("run folder lock %s: %w", path, err)
		}
		raw, rerr := os.ReadFile(path)
		if rerr != nil {
			return nil, fmt.Errorf("run folder lock %s: %w", path, rerr)
		}
		var held lockInfo
		if jerr := json.Unmarshal(bytes.TrimSpace(raw), &held); jerr != nil || held.PID <= 0 {
			// A lock file is written in one small write; an unreadable
			// one was cut off by a crash between create and write.
			note(fmt.Sprintf("run folder lock %s is unreadable (%q); taking it over", path, truncate(raw, 80)))
		} else if held.Host != host {
			return nil, fmt.Errorf("run folder %s is locked by process %d on host %s since %s; "+
				"if that trainer is gone, delete %s", dir, held.PID, held.Host, held.Started, path)
		} else if processAlive(held.PID) {
			return nil, fmt.Errorf("run folder %s is in use by another trainer (process %d, started %s): "+
				"two trainers would overwrite each other's checkpoints and metrics; choose another trainer.default_local_dir", dir, held.PID, held.Started)
		} else {
			note(fmt.Sprintf("run folder lock %s: process %d (started %s) is gone; taking the stale lock over", path, held.PID, held.Started))
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("run folder lock %s: %w", path, err)
		}
	}
	return nil, fmt.Errorf("run folder lock %s: another trainer took it while the stale one was being removed", path)
}

// removeOwnLock removes the lock only while it is still this run's.
func removeOwnLock(path string, me lockInfo) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var held lockInfo
	if json.Unmarshal(bytes.TrimSpace(raw), &held) == nil && held == me {
		os.Remove(path)
	}
}

// processAlive reports whether a process with this pid exists on this
// host. Signal 0 checks without sending anything; EPERM means it exists
// under another user.
func processAlive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// truncateMetrics cuts path (metrics.jsonl) back to the records of steps up
// to step, so that a resumed run, which logs the steps after its checkpoint
// again, leaves each step once. A line that does not parse (the half-written
// last line of a crash) and every line after it are dropped too. It returns
// how many lines were dropped. A missing file is nothing to cut.
func truncateMetrics(path string, step int) (int, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var keep bytes.Buffer
	dropped, bad := 0, false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<16), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec struct {
			Step *int `json:"step"`
		}
		if bad || json.Unmarshal(line, &rec) != nil || rec.Step == nil {
			bad = true
			dropped++
			continue
		}
		if *rec.Step > step {
			dropped++
			continue
		}
		keep.Write(line)
		keep.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if dropped == 0 {
		return 0, nil
	}
	if err := os.WriteFile(path+".tmp", keep.Bytes(), 0o644); err != nil {
		return 0, err
	}
	return dropped, os.Rename(path+".tmp", path)
}
