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
	estimators = map[string]Estimator{}
	losses     = map[string]Loss{}
)

// RegisterEstimator makes an advantage estimator available by name.
func RegisterEstimator(name string, e Estimator) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if e == nil {
		panic("rl: RegisterEstimator " + name + " with a nil estimator")
	}
	if _, dup := estimators[name]; dup {
		panic("rl: RegisterEstimator called twice for " + name)
	}
	estimators[name] = e
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
		return e, nil
	}
	return nil, fmt.Errorf("rl: unknown advantage estimator %q (registered: %s)", name, strings.Join(sortedKeys(estimators), ", "))
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

// LossNames lists the registered losses, sorted.
func LossNames() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return sortedKeys(losses)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
