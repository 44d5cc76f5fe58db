package gemm

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/r1go/r1go/internal/isa"
)

// TestAMXStreamKernels: the stream kernels read what BenchmarkAMXStream
// says they read: the AVX loads' 64 bytes are the OR of every line of
// the stream (or of the lines ahead of it), and the tile kernels' stored
// tile is the stream's last KiB. The tile kernels run only on the tile
// unit; the AVX kernel wherever the CPU has AVX-512.
func TestAMXStreamKernels(t *testing.T) {
	if !isa.X86.AVX512F {
		t.Skip("no AVX-512")
	}
	const steps, ahead = 37, 4096
	rng := rand.New(rand.NewPCG(3, 9))
	buf := make([]uint16, (steps*2048+ahead)/2)
	for i := range buf {
		buf[i] = uint16(rng.Uint32()) & uint16(1<<(i%16)) // each lane's bits set by few lines
	}
	or := func(from int) []uint16 { // the OR of the stream's 64-byte lines, from a byte offset
		w := make([]uint16, 32)
		for i := from / 2; i < from/2+steps*1024; i++ {
			w[i%32] |= buf[i]
		}
		return w
	}
	lastKiB := buf[steps*1024-512 : steps*1024]
	out := make([]uint16, 32+512)
	amxStreamAVX(&buf[0], steps, nil, &out[0], 0)
	if !slices.Equal(out[:32], or(0)) {
		t.Fatalf("amxStreamAVX: %x, want the OR of the stream %x", out[:32], or(0))
	}
	if on, _ := HasAMX(); !on || !isa.X86.AMXTile {
		return
	}
	for _, k := range []struct {
		name string
		fn   func(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)
		avx  bool
	}{{"amxStreamTiles", amxStreamTiles, false}, {"amxStreamTilesPF", amxStreamTilesPF, false}, {"amxStreamTilesAVX", amxStreamTilesAVX, true}} {
		clear(out)
		k.fn(&buf[0], steps, &amxTileConfig[0], &out[0], ahead)
		wantOR := make([]uint16, 32)
		if k.avx {
			wantOR = or(ahead)
		}
		if !slices.Equal(out[:32], wantOR) || !slices.Equal(out[32:], lastKiB) {
			t.Fatalf("%s: OR %x (want %x), last tile equal: %v", k.name, out[:32], wantOR, slices.Equal(out[32:], lastKiB))
		}
	}
}

// BenchmarkAMXStream reads 512 MiB on every core (each its own part, in
// 256 KiB calls) the ways a decode step's products could stream their
// weights, with no arithmetic, taking turns, each reporting its best turn
// in GB/s: AVX-512 loads (the read probe's way: "avx"); the run kernels'
// tile loads alone ("tiles"), with their prefetch of the next block's
// lines into L2 ("tiles-pf", 64 KiB ahead, a block of depth 896 and a
// little more), and with AVX-512 loads of the lines ahead instead
// ("tiles-avx", 64 KiB and 8 KiB ahead). Where "tiles-pf" falls short of
// "avx", the tile loads' way of reading is what the products lose to the
// read bound; where "tiles-avx" recovers it, the loads ahead are the fix.
func BenchmarkAMXStream(b *testing.B) {
	if on, why := HasAMX(); !on || !isa.X86.AMXTile {
		b.Skip("AMX path off:", why)
	}
	const size, chunk, slack = 512 << 20, 256 << 10, 128 << 10
	threads := runtime.GOMAXPROCS(0)
	buf := make([]uint16, (size+slack)/2)
	for i := range buf {
		buf[i] = uint16(i)
	}
	type variant struct {
		name  string
		fn    func(p *uint16, steps int, cfg *byte, out *uint16, ahead uintptr)
		ahead uintptr
	}
	vs := []variant{{"avx", amxStreamAVX, 0}, {"tiles", amxStreamTiles, 0}, {"tiles-pf", amxStreamTilesPF, 64 << 10},
		{"tiles-avx", amxStreamTilesAVX, 64 << 10}, {"tiles-avx-8k", amxStreamTilesAVX, 8 << 10}}
	best := make([]time.Duration, len(vs))
	outs := make([][]uint16, threads)
	for i := range outs {
		outs[i] = make([]uint16, 32+512)
	}
	for b.Loop() {
		for i, v := range vs {
			t0 := time.Now()
			forEach(threads, threads, func(t int) {
				for off := t * size / threads / chunk * chunk; off < (t+1)*size/threads/chunk*chunk; off += chunk {
					v.fn(&buf[off/2], chunk/2048, &amxTileConfig[0], &outs[t][0], v.ahead)
				}
			})
			if d := time.Since(t0); best[i] == 0 || d < best[i] {
				best[i] = d
			}
		}
	}
	for i, v := range vs {
		b.ReportMetric(float64(size)/best[i].Seconds()/1e9, v.name+"-GB/s")
	}
}
