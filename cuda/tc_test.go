package cuda

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// The tensor-core primitives of kernels/tc.cuh through the self-test
// kernels of kernels/tc_check.cu, against float64 products on the host. On
// a GPU they check the fragment layouts the attention kernels rely on; on
// the host emulator they check tc_emu.h itself: its results in both thread
// orders, its bank-conflict counters, the NaN poison of cp.async data read
// before its wait, and the aborts of what the hardware forbids. Settings
// the emulator reads once per process (R1GO_EMU_ORDER, R1GO_EMU_BANKS,
// R1GO_EMU_STATS) and faults that abort it take a child process: the test
// binary run again on one test, with tcChildEnv naming its part.

var (
	kTCGemm      = kernel("tc_check.cu", "tc_check_gemm", 128)
	kTCEarlyRead = kernel("tc_check.cu", "tc_check_early_read", 128)
	kTCFault     = kernel("tc_check.cu", "tc_check_fault", 32)
)

const tcChildEnv = "R1GO_TC_CHILD"

func onEmulator(d *Device) bool { return strings.Contains(d.Name(), "emulator") }

// tcChild runs test again in a child process with tcChildEnv=part and env
// over this process's environment (less the allocation log, which the
// child would truncate), and returns its combined output.
func tcChild(t *testing.T, test, part string, env ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "R1GO_EMU_ALLOC_LOG", "R1GO_EMU_ORDER", "R1GO_EMU_BANKS", "R1GO_EMU_STATS", tcChildEnv:
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(append(cmd.Env, tcChildEnv+"="+part), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tcLaunch runs k on one block of threads threads and waits for it.
func tcLaunch(t *testing.T, d *Device, k kernelID, grid, threads, smem int, args ...uint64) {
	t.Helper()
	func() {
		defer d.enter()()
		d.launch(k, grid1(grid), grid1(threads), smem, args...)
	}()
	if err := d.Sync(); err != nil {
		t.Fatalf("%s: %v", k.name, err)
	}
}

// tcRandBF16 uploads n normal values rounded to bf16 and returns them.
func tcRandBF16(e *opEnv, n int) (Buffer, []float32) {
	b := e.gpu.AllocType(n, BF16)
	return b, tcFill(e, b)
}

// tcFill uploads normal values rounded to bf16 into b and returns them.
func tcFill(e *opEnv, b Buffer) []float32 {
	x := e.randn(b.Len(), 1)
	for i, v := range x {
		x[i] = bf16.ToFloat32(bf16.FromFloat32(v))
	}
	e.gpu.Upload(b, x)
	return x
}

// tcStats returns the counters of the last launch of kernel in the file
// R1GO_EMU_STATS names (runtime.cc writes one line a launch).
func tcStats(t *testing.T, kernel string) map[string]int64 {
	t.Helper()
	f, err := os.Open(os.Getenv("R1GO_EMU_STATS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last string
	for s := bufio.NewScanner(f); s.Scan(); {
		if strings.HasPrefix(s.Text(), "launch kernel="+kernel+" ") {
			last = s.Text()
		}
	}
	if last == "" {
		t.Fatalf("R1GO_EMU_STATS has no launch of %s", kernel)
	}
	m := map[string]int64{}
	for _, kv := range strings.Fields(last)[1:] {
		k, v, _ := strings.Cut(kv, "=")
		m[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return m
}

// TestGPUTCGemm: one 64×64×64 tile through cp.async, a shared tile,
// ldmatrix and mma, with B as [N][K] (plain ldmatrix) and as [K][N]
// (.trans), swizzled or not, against the float64 product. The bf16
// products are exact and 64 of them sum in float32 (the GPU) or double
// (the emulator), so 1e-5 of the largest entry bounds a correct result,
// and a wrong fragment layout is off by O(1). On the emulator the four
// cases run in child processes, in both thread orders, and check the
// counters: per warp 4 k-steps of one A and four B ldmatrix.x4 (80
// instructions, 320 phases for 4 warps) and 32 mma (128); 1,024 cp.async
// of 16 bytes; no extra wavefront swizzled, and 7 a phase unswizzled,
// where all 8 rows of a phase share one quad of banks. The parent process
// runs only the swizzled cases: under R1GO_EMU_BANKS=2 (ci.sh's second
// pass) the unswizzled tile must abort.
func TestGPUTCGemm(t *testing.T) {
	e := newOpEnv(t)
	d := e.gpu
	child := os.Getenv(tcChildEnv) == "gemm"
	emu := onEmulator(d)
	a, av := tcRandBF16(e, 64*64)
	c := d.Alloc(64 * 64)
	defer d.Free(a)
	defer d.Free(c)
	// B ends a buffer big enough for a VMM arena where the device has one,
	// so that cp.async reads mapped chunks as well as cuMemAlloc'd memory.
	big := d.AllocType(max(64*64, vmmMinChunks*int(d.vm.gran)/2), BF16)
	defer d.Free(big)
	b := big.Slice(big.Len()-64*64, 64*64).(Buffer)
	bv := tcFill(e, b)
	for _, kn := range []int{0, 1} {
		for _, swizzle := range []int{1, 0} {
			if swizzle == 0 && emu && !child {
				continue
			}
			name := fmt.Sprintf("B as [N][K], swizzle %d", swizzle)
			if kn == 1 {
				name = fmt.Sprintf("B as [K][N] (.trans), swizzle %d", swizzle)
			}
			d.Zero(c)
			tcLaunch(t, d, kTCGemm, 1, 128, 2*64*64*2, argPtr(ptr(c)), argPtr(a.ptr), argPtr(b.ptr), argInt(kn), argInt(swizzle))
			got := download(d, c)
			var diff, scale float64
			for i := 0; i < 64; i++ {
				for j := 0; j < 64; j++ {
					var s float64
					for k := 0; k < 64; k++ {
						bk := bv[j*64+k]
						if kn == 1 {
							bk = bv[k*64+j]
						}
						s += float64(av[i*64+k]) * float64(bk)
					}
					diff = math.Max(diff, math.Abs(s-float64(got[i*64+j])))
					if math.IsNaN(float64(got[i*64+j])) {
						diff = math.Inf(1)
					}
					scale = math.Max(scale, math.Abs(s))
				}
			}
			if rel := diff / scale; !(rel <= 1e-5) {
				t.Errorf("%s: relative error %.3g > 1e-5", name, rel)
			} else {
				t.Logf("%s: relative error %.3g", name, rel)
			}
			if !child {
				continue
			}
			st := tcStats(t, "tc_check_gemm")
			want := map[string]int64{"mma": 128, "ldmatrix": 80, "phases": 320, "cp_async": 1024, "cp_async_bytes": 16384, "extra_wavefronts": 0}
			if swizzle == 0 {
				want["extra_wavefronts"] = 7 * 320
			}
			for k, v := range want {
				if st[k] != v {
					t.Errorf("%s: %s = %d, want %d", name, k, st[k], v)
				}
			}
			fmt.Printf("tc-gemm %s: extra wavefronts %d over %d phases\n", name, st["extra_wavefronts"], st["phases"])
		}
	}
	if !emu || child {
		return
	}
	for _, order := range []string{"forward", "reverse"} {
		out, err := tcChild(t, "TestGPUTCGemm", "gemm", "R1GO_EMU_ORDER="+order, "R1GO_EMU_BANKS=1",
			"R1GO_EMU_STATS="+filepath.Join(t.TempDir(), "stats"))
		if err != nil {
			t.Fatalf("%s order: %v\n%s", order, err, out)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "tc-gemm ") {
				t.Logf("%s order: %s", order, strings.TrimPrefix(l, "tc-gemm "))
			}
		}
	}
}

// TestGPUTCEarlyRead: a read of cp.async data after a barrier but before
// the wait sees the emulator's NaN poison in both thread orders (in the
// forward order only the one element whose copier has not yet waited; in
// reverse, every element), and the same read after the wait sees the data.
// On a GPU the early read is a race with no certain result.
func TestGPUTCEarlyRead(t *testing.T) {
	e := newOpEnv(t)
	d := e.gpu
	if !onEmulator(d) {
		t.Skip("the early read is a race on a GPU; only the emulator's poison makes its result certain")
	}
	if os.Getenv(tcChildEnv) == "early" {
		a, av := tcRandBF16(e, 64*64)
		out := d.Alloc(256)
		defer d.Free(a)
		defer d.Free(out)
		tcLaunch(t, d, kTCEarlyRead, 1, 128, 64*64*2, argPtr(ptr(out)), argPtr(a.ptr))
		got := download(d, out)
		nans := 0
		for i := 0; i < 128; i++ {
			if math.IsNaN(float64(got[i])) {
				nans++
			}
			if got[128+i] != av[i] {
				t.Errorf("element %d after the wait: %g, want %g", i, got[128+i], av[i])
			}
		}
		if nans == 0 {
			t.Errorf("no read before the wait saw the poison")
		}
		fmt.Printf("tc-early-read: %d of 128 early reads NaN\n", nans)
		return
	}
	for _, order := range []string{"forward", "reverse"} {
		out, err := tcChild(t, "TestGPUTCEarlyRead", "early", "R1GO_EMU_ORDER="+order)
		if err != nil {
			t.Fatalf("%s order: %v\n%s", order, err, out)
		}
		m := regexp.MustCompile(`tc-early-read: (\d+) of 128`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s order: no count in the child's output\n%s", order, out)
		}
		t.Logf("%s order: %s of 128 reads before the wait saw NaN", order, m[1])
	}
}

// TestGPUTCFaults: each rule of tc_check_fault broken aborts the emulator
// with the kernel's name, block and thread and what went wrong.
func TestGPUTCFaults(t *testing.T) {
	d := gpuOrSkip(t)
	if !onEmulator(d) {
		t.Skip("faults the emulator reports; on a GPU they are undefined behaviour or a sticky error")
	}
	const n = 128 // bf16 values of src: 256 bytes, what cuMemAlloc is asked for
	if part, ok := strings.CutPrefix(os.Getenv(tcChildEnv), "fault"); ok {
		which, _ := strconv.Atoi(part)
		src, out := d.AllocType(n, BF16), d.Alloc(32)
		tcLaunch(t, d, kTCFault, 1, 32, 1024, argPtr(ptr(out)), argPtr(src.ptr), argInt(n), argInt(which))
		t.Fatalf("case %d ran to its end", which)
	}
	for _, c := range []struct {
		name  string
		which int
		env   []string
		want  string
	}{
		{"divergent mma", 0, nil, "divergent warp"},
		{"misaligned ldmatrix", 1, nil, "row address at shared offset 88 is not 16-byte aligned"},
		{"ldmatrix past shared memory", 2, nil, "outside the block's 1024 bytes of dynamic shared memory"},
		{"cp.async source past the allocation", 3, nil, "(src-size 0) is outside every live device allocation"},
		{"mma after a lane returned", 4, nil, "needs all 32 lanes of the warp (.sync.aligned), but lane 31 has exited"},
		{"misaligned red.v2", 5, nil, "tc_red_add2: address"},
		{"bank conflict under R1GO_EMU_BANKS=2", 6, []string{"R1GO_EMU_BANKS=2"}, "bank conflict, matrix 0's rows take 8 wavefronts"},
	} {
		out, err := tcChild(t, "TestGPUTCFaults", fmt.Sprint("fault", c.which), c.env...)
		var ee *exec.ExitError
		head := "cuda emulator: tc_check_fault, block (0,0,0), thread ("
		if !errors.As(err, &ee) || !strings.Contains(out, head) || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %v, want an abort with %q and %q in:\n%s", c.name, err, head, c.want, out)
			continue
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "cuda emulator:") {
				t.Logf("%s: %s", c.name, l)
			}
		}
	}
}

// tcPeakValue is tc_peak_value of tc_check.cu: the bf16 bits of a multiple
// of 1/2 in [-3/2, 3/2] drawn from seed, the warp, the lane and a slot.
func tcPeakValue(seed, warp, lane, slot uint32) float64 {
	h := seed ^ warp*0x9e3779b1 ^ lane*0x85ebca77 ^ slot*0xc2b2ae3d
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 12
	h *= 0x297a2d39
	h ^= h >> 15
	return float64(int(h%7)-3) * 0.5
}

// TestGPUTCMMAPeak: tc_mma_peak's chains against the same chains on the
// host. The host builds each warp's A (16×16) and its eight B (16×8) from
// the registers the lanes fill, by the PTX ISA's layout: lane (g, t) =
// (lane/4, lane%4) holds in a[i], half h, A(g + 8(i%2), 2t + h + 8(i/2)),
// in b[j], half h, B(2t + h + 8j, g), and receives D(g + 8(i/2), 2t + i%2)
// in d[i]. Every value is a multiple of 1/4 far below 2^24, so a correct
// result is exact.
func TestGPUTCMMAPeak(t *testing.T) {
	e := newOpEnv(t)
	d := e.gpu
	const blocks, iters = 2, 3
	seed := uint32(e.rng.Uint64())
	out := d.Alloc(blocks * 256 * 32)
	defer d.Free(out)
	tcLaunch(t, d, kTCMMAPeak, blocks, 256, 0, argPtr(ptr(out)), argInt(iters), uint64(seed))
	got := download(d, out)
	bad := 0
	for w := uint32(0); w < blocks*8; w++ {
		var A [16][16]float64
		var B [8][16][8]float64
		for lane := uint32(0); lane < 32; lane++ {
			g, tt := int(lane/4), int(lane%4)
			for i := 0; i < 4; i++ {
				for h := 0; h < 2; h++ {
					A[g+8*(i%2)][2*tt+h+8*(i/2)] = tcPeakValue(seed, w, lane, uint32(2*i+h))
				}
			}
			for c := 0; c < 8; c++ {
				for j := 0; j < 2; j++ {
					for h := 0; h < 2; h++ {
						B[c][2*tt+h+8*j][g] = tcPeakValue(seed, w, lane, uint32(8+4*c+2*j+h))
					}
				}
			}
		}
		for lane := 0; lane < 32; lane++ {
			g, tt := lane/4, lane%4
			for c := 0; c < 8; c++ {
				for i := 0; i < 4; i++ {
					r, col := g+8*(i/2), 2*tt+i%2
					var s float64
					for k := 0; k < 16; k++ {
						s += A[r][k] * B[c][k][col]
					}
					want := float32(iters * s)
					if v := got[(int(w)*32+lane)*32+4*c+i]; v != want {
						if bad++; bad <= 5 {
							t.Errorf("warp %d lane %d chain %d d[%d] = %g, want %g", w, lane, c, i, v, want)
						}
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d accumulators wrong", bad, len(got))
	}
}

// BenchmarkGPUTCMMAPeak reports the mma.sync ceiling: tc_mma_peak on 16
// blocks a streaming multiprocessor, in TFLOP/s.
func BenchmarkGPUTCMMAPeak(b *testing.B) {
	gpuOnce.Do(func() { gpuDev, gpuErr = Open() })
	d := gpuDev
	if gpuErr != nil {
		b.Skip(gpuErr)
	}
	if onEmulator(d) {
		b.Skip("the emulator measures nothing")
	}
	tf, err := d.MMAPeak(4096, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(tf, "TFLOP/s")
}
