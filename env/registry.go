package env

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Tools by name. A tool registers a factory from its package's init, and a
// config picks tools by name (env.tools=[search, lookup]); NewTools builds
// them for one run. Registering a name twice panics, as the rl registries
// do: two packages claiming one name is a programmer's mistake.

// ToolDeps is what a tool factory may use to build its tool: the run's
// retriever over its corpus and the search tool's settings. A factory
// ignores what it does not need.
type ToolDeps struct {
	Retriever Retriever
	Search    SearchToolConfig
}

// ToolFactory builds one tool for a run.
type ToolFactory func(d ToolDeps) (Tool, error)

var (
	toolsMu   sync.RWMutex
	factories = map[string]ToolFactory{}
)

// RegisterTool makes a tool available by name.
func RegisterTool(name string, f ToolFactory) {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if f == nil {
		panic("env: RegisterTool " + name + " with a nil factory")
	}
	if _, dup := factories[name]; dup {
		panic("env: RegisterTool called twice for " + name)
	}
	factories[name] = f
}

// ToolNames lists the registered tools, sorted.
func ToolNames() []string {
	toolsMu.RLock()
	defer toolsMu.RUnlock()
	return toolNamesLocked()
}

// CheckToolNames reports an empty list, a repeated name, or a name no tool
// is registered under, before anything is built.
func CheckToolNames(names []string) error {
	toolsMu.RLock()
	defer toolsMu.RUnlock()
	if len(names) == 0 {
		return fmt.Errorf("no tools (registered: %s)", strings.Join(toolNamesLocked(), ", "))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if _, ok := factories[n]; !ok {
			return fmt.Errorf("unknown tool %q (registered: %s)", n, strings.Join(toolNamesLocked(), ", "))
		}
		if seen[n] {
			return fmt.Errorf("tool %q named twice", n)
		}
		seen[n] = true
	}
	return nil
}

// toolNamesLocked is ToolNames for a caller holding toolsMu.
func toolNamesLocked() []string {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewTools builds the named tools, in order.
func NewTools(names []string, d ToolDeps) ([]Tool, error) {
	if err := CheckToolNames(names); err != nil {
		return nil, fmt.Errorf("env: %w", err)
	}
	tools := make([]Tool, len(names))
	for i, n := range names {
		toolsMu.RLock()
		f := factories[n]
		toolsMu.RUnlock()
		t, err := f(d)
		if err != nil {
			return nil, fmt.Errorf("env: tool %s: %w", n, err)
		}
		tools[i] = t
	}
	return tools, nil
}

func init() {
	RegisterTool("search", func(d ToolDeps) (Tool, error) {
		cfg := d.Search
		cfg.Name = "search"
		return NewSearchTool(d.Retriever, cfg)
	})
	RegisterTool("lookup", func(ToolDeps) (Tool, error) { return LookupTool{}, nil })
}

// Memory is what the tools of one episode share: the passages the last
// search returned (the lookup tool reads them) and each lookup term's
// position. The episode (ToolEnv) owns one and hands it to every tool call
// through the context, so tools stay shared across episodes and stateless.
type Memory struct {
	mu       sync.Mutex
	passages []string
	cursor   map[string]int // lower-cased term → sentences of the passages already returned
}

type memoryKey struct{}

// WithMemory returns ctx carrying m.
func WithMemory(ctx context.Context, m *Memory) context.Context {
	return context.WithValue(ctx, memoryKey{}, m)
}

// MemoryFrom returns the episode memory in ctx, or nil outside an episode.
func MemoryFrom(ctx context.Context) *Memory {
	m, _ := ctx.Value(memoryKey{}).(*Memory)
	return m
}

// SetPassages records a search's passages and restarts every lookup.
func (m *Memory) SetPassages(p []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.passages, m.cursor = p, nil
}
