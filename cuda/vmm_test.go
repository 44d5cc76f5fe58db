package cuda

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestGPUVMMPages gives back a span of a VMM arena that starts and ends
// inside chunks: the chunks wholly inside it are unmapped (the mapped
// bytes drop by exactly them, the allocation log says "unmap" for each),
// the values outside it are untouched, and MapPages brings the chunks back
// zeroed (a "map" line each). With VMM off (Options.VMM unset) the same calls
// only zero the span, and the values read the same.
func TestGPUVMMPages(t *testing.T) {
	gpuOrSkip(t)
	g, err := OpenWith(Options{VMM: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	on, note := g.VMM()
	if !on {
		if strings.Contains(g.Name(), "emulator") && os.Getenv("R1GO_EMU_NO_VMM") != "1" {
			t.Fatalf("the emulator offers VMM, the device does not use it: %s", note)
		}
		t.Skipf("no VMM here: %s", note)
	}
	chunk := int(g.vm.gran) / 4
	n := 10*chunk + 100
	host := make([]float32, n)
	for i := range host {
		host[i] = float32(i%977) + 0.5
	}
	lo, m := chunk+chunk/3, 5*chunk // [lo, lo+m) holds chunks 2..5 whole, 1 and 6 in part
	for _, noVMM := range []bool{false, true} {
		d, err := OpenWith(Options{VMM: !noVMM})
		if err != nil {
			t.Fatal(err)
		}
		b := d.Alloc(n)
		d.Upload(b, host)
		before, _ := d.MappedBytes()
		base := b.(Buffer).ptr
		if _, isArena := d.vm.arenas[base]; isArena == noVMM {
			t.Fatalf("NoVMM %v: a buffer of %d values is a VMM arena: %v (%s)", noVMM, n, isArena, d.vm.note)
		}
		logFrom := logSize(t)
		d.ReleasePages(b.Slice(lo, m))
		after, _ := d.MappedBytes()
		pb, _ := d.PagedBytes(b)
		wantGone := int64(0)
		if !noVMM {
			wantGone = 4 * 4 * int64(chunk)
		}
		if before-after != wantGone || !noVMM && pb != 4*7*int64(chunk) {
			t.Fatalf("NoVMM %v: releasing %d values gave back %d bytes (%d of the buffer's chunks mapped), want %d", noVMM, m, before-after, pb, wantGone)
		}
		if !noVMM && logFrom >= 0 {
			if got := logLines(t, logFrom, "unmap", base, uintptr(4*n)); len(got) != 4 {
				t.Fatalf("the allocation log has %d unmap lines in the arena, want 4 (chunks 2-5): %q", len(got), got)
			}
		}
		// Outside the span nothing changed (reading inside it would fault).
		head, tail := make([]float32, lo), make([]float32, n-lo-m)
		d.Download(head, b.Slice(0, lo))
		d.Download(tail, b.Slice(lo+m, n-lo-m))
		for i, v := range head {
			if v != host[i] {
				t.Fatalf("NoVMM %v: value %d before the span is %v, was %v", noVMM, i, v, host[i])
			}
		}
		for i, v := range tail {
			if v != host[lo+m+i] {
				t.Fatalf("NoVMM %v: value %d after the span is %v, was %v", noVMM, lo+m+i, v, host[lo+m+i])
			}
		}
		logFrom = logSize(t)
		d.MapPages(b.Slice(lo+10, 10)) // one chunk's worth is enough to ask
		d.MapPages(b.Slice(lo, m))
		if now, _ := d.MappedBytes(); now != before {
			t.Fatalf("NoVMM %v: %d bytes mapped after MapPages, %d before the release", noVMM, now, before)
		}
		if !noVMM && logFrom >= 0 {
			if got := logLines(t, logFrom, "map", base, uintptr(4*n)); len(got) != 4 {
				t.Fatalf("the allocation log has %d map lines in the arena after MapPages, want 4: %q", len(got), got)
			}
		}
		all := make([]float32, n)
		d.Download(all, b)
		for i, v := range all {
			want := host[i]
			if i >= lo && i < lo+m {
				want = 0
			}
			if v != want {
				t.Fatalf("NoVMM %v: value %d is %v after MapPages, want %v", noVMM, i, v, want)
			}
		}
		// Zero maps what it clears.
		d.ReleasePages(b)
		d.Zero(b.Slice(0, 3*chunk))
		d.Download(all[:3*chunk], b.Slice(0, 3*chunk))
		for i, v := range all[:3*chunk] {
			if v != 0 {
				t.Fatalf("NoVMM %v: value %d is %v after Zero of a given-back span", noVMM, i, v)
			}
		}
		// A busy GPU (R1GO_EMU_EVENTS_LAG=1: no event has passed): the
		// chunks given back wait for the stream, a MapPages that needs
		// them waits for their event, and Sync gives back the rest.
		if strings.Contains(d.Name(), "emulator") && !noVMM {
			t.Setenv("R1GO_EMU_EVENTS_LAG", "1")
			d.Zero(b)
			full, _ := d.MappedBytes()
			d.ReleasePages(b.Slice(0, 3*chunk))
			d.ReleasePages(b.Slice(4*chunk, 3*chunk))
			if now, _ := d.MappedBytes(); now != full || len(d.vm.pending) != 2 {
				t.Fatalf("with the stream busy, ReleasePages unmapped at once: %d bytes mapped of %d, %d spans pending", now, full, len(d.vm.pending))
			}
			d.MapPages(b.Slice(chunk, 10)) // chunk 1 is pending: waited for, unmapped, mapped afresh
			if now, _ := d.MappedBytes(); now != full-4*int64(2*chunk) || len(d.vm.pending) != 1 {
				t.Fatalf("MapPages of a pending chunk: %d bytes mapped, want %d; %d spans pending, want 1", now, full-4*int64(2*chunk), len(d.vm.pending))
			}
			if err := d.Sync(); err != nil {
				t.Fatal(err)
			}
			if now, _ := d.MappedBytes(); now != full-4*int64(5*chunk) || len(d.vm.pending) != 0 {
				t.Fatalf("after Sync %d bytes mapped, want %d; %d spans pending", now, full-4*int64(5*chunk), len(d.vm.pending))
			}
			one := make([]float32, chunk)
			d.Download(one, b.Slice(chunk, chunk))
			for i, v := range one {
				if v != 0 {
					t.Fatalf("value %d of the chunk mapped again is %v", chunk+i, v)
				}
			}
			os.Setenv("R1GO_EMU_EVENTS_LAG", "0")
		}
		d.Free(b)
		if now, _ := d.MappedBytes(); now != 0 {
			t.Fatalf("NoVMM %v: %d bytes still mapped after Free", noVMM, now)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// logSize is the emulator allocation log's length now, or -1 when there
// is none (on a GPU): the log lines checks are then skipped.
func logSize(t *testing.T) int64 {
	path := os.Getenv("R1GO_EMU_ALLOC_LOG")
	if path == "" {
		return -1
	}
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// logLines returns the allocation log's lines of kind ("map", "unmap")
// past offset from whose address lies in [base, base+size), or nil when
// there is no log (from < 0).
func logLines(t *testing.T, from int64, kind string, base, size uintptr) []string {
	t.Helper()
	if from < 0 {
		return nil
	}
	raw, err := os.ReadFile(os.Getenv("R1GO_EMU_ALLOC_LOG"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) < from {
		t.Fatalf("the allocation log shrank below %d bytes: another process opened it (one test binary per log)", from)
	}
	var out []string
	for _, l := range strings.Split(string(raw[from:]), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != kind {
			continue
		}
		p, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
		if err != nil {
			t.Fatalf("allocation log line %q: %v", l, err)
		}
		if uintptr(p) >= base && uintptr(p) < base+size {
			out = append(out, l)
		}
	}
	return out
}

// chunkSet is the set of chunk addresses named by log lines.
func chunkSet(lines []string) map[string]bool {
	s := map[string]bool{}
	for _, l := range lines {
		s[strings.Fields(l)[1]] = true
	}
	return s
}
