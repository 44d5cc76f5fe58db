package model

import "fmt"

// Memory by phase. The parts of an RL step are live at different times:
// a reference policy's weights while it scores, the Adam moments during
// the optimizer step, the activations from a training forward to the end
// of its backward, a rollout copy during the rollout. State that must
// survive its idle phases (frozen weights, moments) goes into shared
// mappings of unlinked files (SpillBuffer, SpillWeights): its pages are
// page cache that the kernel may write back and evict under memory
// pressure and read back on the next touch, and DropPages takes them out
// of the process's resident set when their phase ends. Memory whose values
// are dead (DiscardActivations; DiscardWeights of a copy rewritten before
// its next use) is given back, zeroed. No live value changes.

// SpillWeights moves the weights of a frozen model on the CPU into a
// shared mapping of an unlinked file in dir (the file's disk space goes
// when the process ends). dir must be on a disk: a tmpfs or ramfs spill
// would still be memory, and is refused. Spilling twice is a no-op. A
// Base() taken before keeps the weights it had.
func (m *Model) SpillWeights(dir string) error {
	if !m.Frozen() {
		return fmt.Errorf("model: only a frozen model's weights can be spilled (a trained one writes them every step)")
	}
	if m.spilled {
		return nil
	}
	sp, err := SpillBuffer(m.Dev, m.Params, dir)
	if err != nil {
		return fmt.Errorf("model: spill weights: %w", err)
	}
	old := m.Params
	m.Params, m.spilled = sp, true
	m.setViews()
	m.Dev.Free(old)
	return nil
}

// SpillBuffer returns a copy of b, a host buffer (float32 or bf16) of
// dev, in a shared mapping of an unlinked file in dir (HostMemory.Spill);
// a device without host memory cannot spill.
func SpillBuffer(dev Device, b Buffer, dir string) (Buffer, error) {
	h, ok := dev.(HostMemory)
	if !ok {
		return nil, fmt.Errorf("spilling needs host memory (the CPU device), not %s", dev.Name())
	}
	return h.Spill(b, dir)
}

// DropPages gives back the memory of b, a buffer of dev, where dev's
// buffers are host memory (HostMemory, with Pager.ReleasePages): a spilled
// buffer's pages leave the resident set and stay in the page cache (its
// values remain), other host memory is zeroed, its pages given back.
// Elsewhere it does nothing: a GPU's memory is not paged by phase.
func DropPages(dev Device, b Buffer) {
	_, host := dev.(HostMemory)
	if p, ok := dev.(Pager); ok && host {
		p.ReleasePages(b)
	}
}

// Spilled says whether SpillWeights moved the weights into a file mapping.
func (m *Model) Spilled() bool { return m.spilled }

// DropWeightPages takes a spilled model's weights out of the resident set
// (the page cache keeps them while memory allows; the next forward reads
// them back). A no-op for weights that are not spilled.
func (m *Model) DropWeightPages() {
	if m.spilled {
		DropPages(m.Dev, m.Params)
	}
}

// CopyWeightsFrom overwrites the weights of m, a frozen copy of src (same
// config; CloneWith made it), with src's current ones, rounding them to
// bf16 when m stores bf16: a rollout copy follows its policy after each
// optimizer step this way (a spilled copy's go to its file).
func (m *Model) CopyWeightsFrom(src *Model) error {
	if m.Params.Len() != src.Params.Len() || m.d != src.d {
		return fmt.Errorf("model: CopyWeightsFrom a model of another shape (%d parameters into %d)", src.Params.Len(), m.Params.Len())
	}
	if len(src.tiles) > 0 {
		return errTileSource
	}
	m.Dev.Copy(m.Params, src.Params)
	m.packTiles()
	return nil
}

// DiscardWeights gives the memory of a frozen copy's weights on the CPU
// back to the system until CopyWeightsFrom writes them again (a rollout
// copy between rollouts): they read as zeros until then (a spilled
// copy's keep their values in its file). Elsewhere it does nothing.
func (m *Model) DiscardWeights() {
	if m.Frozen() {
		DropPages(m.Dev, m.Params)
	}
}

// DiscardActivations gives back the memory of the last training
// forward's activations on the CPU (once its Backward is done, before an
// optimizer step that needs the room); the next Forward writes them again.
// Elsewhere it does nothing.
func (m *Model) DiscardActivations() {
	if a := m.acts; a != nil {
		DropPages(m.Dev, a.arena)
		if a.grp != nil {
			DropPages(m.Dev, a.grp.arena)
		}
		a.logits = nil
		m.train = false // no Backward of a discarded forward
	}
}
