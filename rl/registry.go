package rl

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// The registries of estimators and losses. Built-ins register from init;
// a user package registers its own from its init and is enabled with a blank
// import, like image formats. Registering a name twice panics: two packages
// claiming one name is a programmer's mistake that must not be resolved by
// import order.
var (
	registryMu sync.RWMutex
	estimators = map[string]registered{}
	losses     = map[string]Loss{}
)

// Needs is what an estimator reads beyond the rewards, the masks and the
// group ids. The trainer provides each: it loads and trains a value model
// for Values and rolls out each prompt greedily for Baseline, so nothing
// outside the registry compares estimator names.
type Needs struct {
	Values   bool // Batch.OldValues, from a critic (a value model is loaded and trained)
	Baseline bool // Batch.BaselineScore, the score of each prompt's greedy response
	// Trajectories says the estimator credits a trajectory packed as
	// several sequences (step mode, Batch.Traj) as one; Estimate refuses
	// such a batch to an estimator without it, which would treat each
	// sequence as a trajectory of its own.
	Trajectories bool
}

type registered struct {
	fn    Estimator
	needs Needs
}

// RegisterEstimator makes an advantage estimator available by name, with
// what it needs from the trainer.
func RegisterEstimator(name string, e Estimator, needs Needs) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if e == nil {
		panic("rl: RegisterEstimator " + name + " with a nil estimator")
	}
	if _, dup := estimators[name]; dup {
		panic("rl: RegisterEstimator called twice for " + name)
	}
	estimators[name] = registered{e, needs}
}

// RegisterLoss makes a loss available by name (cfg.PolicyLoss names the
// actor's). Hand-written losses and autodiff losses (AutodiffLoss) share the
// registry.
func RegisterLoss(name string, l Loss) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if l == nil {
		panic("rl: RegisterLoss " + name + " with a nil loss")
	}
	if _, dup := losses[name]; dup {
		panic("rl: RegisterLoss called twice for " + name)
	}
	losses[name] = l
}

// LookupEstimator returns the estimator registered as name.
func LookupEstimator(name string) (Estimator, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if e, ok := estimators[name]; ok {
		return e.fn, nil
	}
	return nil, unknownEstimator(name)
}

// EstimatorNeeds returns what the estimator registered as name needs.
func EstimatorNeeds(name string) (Needs, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if e, ok := estimators[name]; ok {
		return e.needs, nil
	}
	return Needs{}, unknownEstimator(name)
}

// unknownEstimator names the registered estimators; the caller holds the lock.
func unknownEstimator(name string) error {
	return fmt.Errorf("rl: unknown advantage estimator %q (registered: %s)", name, strings.Join(sortedKeys(estimators), ", "))
}

// LookupLoss returns the loss registered as name.
func LookupLoss(name string) (Loss, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	if l, ok := losses[name]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("rl: unknown loss %q (registered: %s)", name, strings.Join(sortedKeys(losses), ", "))
}

// EstimatorNames lists the registered estimators, sorted.
func EstimatorNames() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return sortedKeys(estimators)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// trajectoryEstimators lists the estimators that credit trajectories
// packed as several sequences (Needs.Trajectories), for error messages.
func trajectoryEstimators() string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var names []string
	for _, n := range sortedKeys(estimators) {
		if estimators[n].needs.Trajectories {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}
