package cuda

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nvrtcOrSkip loads NVRTC (R1GO_NVRTC, or libnvrtc.so.13/.12 on the
// loader's path) or skips: compiling needs the library but no GPU.
func nvrtcOrSkip(t *testing.T) *nvrtc {
	t.Helper()
	c, err := loadNVRTC()
	if errors.Is(err, ErrNoNVRTC) && os.Getenv("R1GO_EMU_STRICT") == "1" {
		t.Fatalf("R1GO_EMU_STRICT=1 but NVRTC did not load: %v", err)
	}
	if errors.Is(err, ErrNoNVRTC) {
		t.Skipf("no NVRTC (set R1GO_NVRTC to a libnvrtc.so.12 or .13; dependencies.md §7 unpacks NVRTC 12.5 from Debian): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ptxasFunc is what ptxas -v reports of one function.
type ptxasFunc struct {
	regs, stack, spillStores, spillLoads int
}

var (
	ptxasName  = regexp.MustCompile(`(?:Compiling entry function|Function properties for) '?([\w$.]+)'?`)
	ptxasFrame = regexp.MustCompile(`(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads`)
	ptxasRegs  = regexp.MustCompile(`Used (\d+) registers`)
)

// ptxasReport reads the per-function lines of an NVRTC log compiled with
// --ptxas-options=-v: "Compiling entry function 'k'" or "Function
// properties for k" names the function the next lines describe.
func ptxasReport(log string) map[string]*ptxasFunc {
	out := map[string]*ptxasFunc{}
	var cur *ptxasFunc
	for _, l := range strings.Split(log, "\n") {
		if m := ptxasName.FindStringSubmatch(l); m != nil {
			if cur = out[m[1]]; cur == nil {
				cur = &ptxasFunc{}
				out[m[1]] = cur
			}
			continue
		}
		if cur == nil {
			continue
		}
		if m := ptxasFrame.FindStringSubmatch(l); m != nil {
			cur.stack, _ = strconv.Atoi(m[1])
			cur.spillStores, _ = strconv.Atoi(m[2])
			cur.spillLoads, _ = strconv.Atoi(m[3])
		}
		if m := ptxasRegs.FindStringSubmatch(l); m != nil {
			cur.regs, _ = strconv.Atoi(m[1])
		}
	}
	return out
}

// spills lists the functions of a ptxas report that spill registers to
// local memory: a kernel that spills runs several times slower, and the
// tensor-core kernels sit close to the 255-register limit.
func spills(rep map[string]*ptxasFunc) []string {
	var out []string
	for name, f := range rep {
		if f.spillStores > 0 || f.spillLoads > 0 {
			out = append(out, fmt.Sprintf("%s (%d bytes spill stores, %d bytes spill loads)", name, f.spillStores, f.spillLoads))
		}
	}
	slices.Sort(out)
	return out
}

// ptxasVerbose is compileOptions with ptxas's per-function report.
var ptxasVerbose = append(slices.Clone(compileOptions), "--ptxas-options=-v")

// TestCompileKernels compiles every embedded kernel file with NVRTC for
// Hopper (sm_90a, the H200) and Ampere (sm_80), and checks that each
// CUBIN defines every kernel its launchers name, and nothing declared is
// missing: a renamed kernel or launcher fails here, not on the GPU. ptxas
// reports each function's registers and spills (--ptxas-options=-v): no
// function may spill.
func TestCompileKernels(t *testing.T) {
	c := nvrtcOrSkip(t)
	t.Logf("NVRTC %s from %s", c.version(), c.lib.path)
	byFile := map[string][]string{}
	for _, k := range allKernels {
		byFile[k.file] = append(byFile[k.file], k.name)
	}
	for _, file := range kernelFiles() {
		if len(byFile[file]) == 0 {
			t.Errorf("%s: no launcher uses any kernel of this file", file)
		}
	}
	for _, arch := range []string{"sm_90a", "sm_80"} {
		for file, names := range byFile {
			src, err := kernelSource(file)
			if err != nil {
				t.Fatal(err)
			}
			img, log, err := c.compileLog(src, arch, ptxasVerbose)
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			rep := ptxasReport(log)
			if s := spills(rep); len(s) > 0 {
				t.Errorf("%s (%s): functions spill registers: %s", file, arch, strings.Join(s, "; "))
			}
			syms := cubinFunctions(t, img)
			regs := cubinRegisters(t, img)
			for _, n := range names {
				if !slices.Contains(syms, n) {
					t.Errorf("%s (%s): no kernel %s in the CUBIN (functions: %v)", file, arch, n, syms)
				}
			}
			for _, k := range allKernels {
				if k.file != file {
					continue
				}
				// A block needs registers × threads ≤ 64K (every GPU since
				// Kepler); past that its launch fails.
				r, ok := regs[k.name]
				if !ok || r == 0 || r*k.maxThreads > 65536 {
					t.Errorf("%s (%s): %d registers a thread (found %v) for blocks of %d threads", k.name, arch, r, ok, k.maxThreads)
				}
				p, ok := rep[k.name]
				if !ok || p.regs != r {
					t.Errorf("%s (%s): ptxas reports %+v (found %v), the CUBIN %d registers", k.name, arch, p, ok, r)
					continue
				}
				if arch == "sm_90a" {
					t.Logf("%s: %d registers, %d bytes stack frame, blocks of up to %d threads", k.name, r, p.stack, k.maxThreads)
				}
			}
		}
	}
}

// cubinFunctions lists the function symbols of a CUBIN. A CUBIN is an
// ELF64 file whose version fields carry NVIDIA's own numbers (the ABI
// version), which debug/elf refuses; they are reset to EV_CURRENT on a copy
// before parsing. Nothing else in the file depends on them.
func cubinFunctions(t *testing.T, img []byte) []string {
	t.Helper()
	if len(img) < 64 || string(img[:4]) != "\x7fELF" {
		t.Fatalf("CUBIN does not start with an ELF header")
	}
	img = bytes.Clone(img)
	img[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(img[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatalf("CUBIN is not an ELF file: %v", err)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("CUBIN symbols: %v", err)
	}
	var out []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			out = append(out, s.Name)
		}
	}
	return out
}

// cubinRegisters reads the registers each kernel uses from the CUBIN's
// .nv.info section: records of (format, attribute, size, value), where
// format 4 carries a size-long value and attribute 0x2f (EIATTR_REGCOUNT)
// holds (symbol index, registers).
func cubinRegisters(t *testing.T, img []byte) map[string]int {
	t.Helper()
	img = bytes.Clone(img)
	img[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint32(img[20:], uint32(elf.EV_CURRENT))
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols() // index i of the symbol table is syms[i-1]
	sec := f.Section(".nv.info")
	if sec == nil {
		t.Fatal("CUBIN has no .nv.info section")
	}
	d, _ := sec.Data()
	out := map[string]int{}
	for i := 0; i+4 <= len(d); {
		format, attr := d[i], d[i+1]
		switch format {
		case 4:
			size := int(binary.LittleEndian.Uint16(d[i+2:]))
			if attr == 0x2f && size == 8 {
				sym := int(binary.LittleEndian.Uint32(d[i+4:]))
				if sym >= 1 && sym <= len(syms) {
					out[syms[sym-1].Name] = int(binary.LittleEndian.Uint32(d[i+8:]))
				}
			}
			i += 4 + size
		case 1, 2, 3:
			i += 4
		default:
			t.Fatalf(".nv.info record of unknown format %d at byte %d", format, i)
		}
	}
	return out
}

// TestSpillCheck: the spill check of TestCompileKernels fails a kernel
// that spills. The probe keeps 64 floats live in a loop that reads each
// one's neighbour, under bounds (1,024 threads, 2 blocks an SM) that leave
// ptxas 32 registers a thread.
func TestSpillCheck(t *testing.T) {
	c := nvrtcOrSkip(t)
	probe := source{name: "spill_probe.cu", text: `
extern "C" __global__ void __launch_bounds__(1024, 2) spill_probe(float* out, const float* in, int rounds) {
    float v[64];
#pragma unroll
    for (int i = 0; i < 64; i++) v[i] = in[threadIdx.x + i * 1024];
    for (int r = 0; r < rounds; r++) {
#pragma unroll
        for (int i = 0; i < 64; i++) v[i] = v[i] * v[(i + 1) % 64] + 1.0f;
    }
#pragma unroll
    for (int i = 0; i < 64; i++) out[threadIdx.x + i * 1024] = v[i];
}
`}
	for _, arch := range []string{"sm_90a", "sm_80"} {
		_, log, err := c.compileLog(probe, arch, ptxasVerbose)
		if err != nil {
			t.Fatal(err)
		}
		rep := ptxasReport(log)
		s := spills(rep)
		if len(s) != 1 || !strings.HasPrefix(s[0], "spill_probe ") {
			t.Errorf("%s: spills %q of the report %+v, want spill_probe's; log:\n%s", arch, s, rep["spill_probe"], log)
		} else {
			t.Logf("%s: %s, %d registers", arch, s[0], rep["spill_probe"].regs)
		}
	}
}

// TestLaunchBounds: every kernel's __launch_bounds__ in its source is the
// block size its Go declaration allows (a second argument, the blocks an
// SM should hold, may follow).
func TestLaunchBounds(t *testing.T) {
	for _, k := range allKernels {
		src, err := kernelSource(k.file)
		if err != nil {
			t.Fatal(err)
		}
		want := regexp.MustCompile(fmt.Sprintf(`__launch_bounds__\(%d(, *\d+)?\) %s\(`, k.maxThreads, k.name))
		if !want.MatchString(src.text) {
			t.Errorf("%s: %s does not declare %q", k.file, k.name, want)
		}
	}
}

// TestCompileErrorLog: a kernel NVRTC rejects comes back as a CompileError
// carrying the compiler's message.
func TestCompileErrorLog(t *testing.T) {
	c := nvrtcOrSkip(t)
	_, err := c.compile(source{name: "broken.cu", text: "extern \"C\" __global__ void k(float* x) { x[0] = undefined_name; }"}, "sm_90a", compileOptions)
	var ce *CompileError
	if !errors.As(err, &ce) || !bytes.Contains([]byte(ce.Log), []byte("undefined_name")) {
		t.Fatalf("error %v, want a CompileError whose log names undefined_name", err)
	}
}

// TestKernelCache: the first request compiles and stores the image, the
// second reads it back; a corrupt (empty) entry is recompiled.
func TestKernelCache(t *testing.T) {
	c := nvrtcOrSkip(t)
	kc := &kernelCache{dir: t.TempDir(), compiler: c}
	img1, cached, err := kc.image("residual.cu", "sm_90a")
	if err != nil || cached {
		t.Fatalf("first request: cached=%v err=%v", cached, err)
	}
	img2, cached, err := kc.image("residual.cu", "sm_90a")
	if err != nil || !cached || !bytes.Equal(img1, img2) {
		t.Fatalf("second request: cached=%v err=%v same=%v", cached, err, bytes.Equal(img1, img2))
	}
	files, _ := filepath.Glob(filepath.Join(kc.dir, "residual-sm_90a-*.cubin"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	os.WriteFile(files[0], nil, 0o644)
	if _, cached, err = kc.image("residual.cu", "sm_90a"); err != nil || cached {
		t.Fatalf("after truncating the entry: cached=%v err=%v", cached, err)
	}
}

// TestCacheKey: the key changes with each input that changes the image.
func TestCacheKey(t *testing.T) {
	src, err := kernelSource("rmsnorm.cu")
	if err != nil {
		t.Fatal(err)
	}
	base := cacheKey(src, "sm_90a", "12.5", compileOptions)
	if cacheKey(src, "sm_90a", "12.5", compileOptions) != base {
		t.Fatal("cache key is not deterministic")
	}
	edited := src
	edited.text += "\n"
	hdr := src
	hdr.headers = append([]header(nil), src.headers...)
	hdr.headers[0].text += " "
	variants := map[string]string{
		"arch":    cacheKey(src, "sm_80", "12.5", compileOptions),
		"version": cacheKey(src, "sm_90a", "13.0", compileOptions),
		"options": cacheKey(src, "sm_90a", "12.5", append(slices.Clone(compileOptions), "-DX=1")),
		"source":  cacheKey(edited, "sm_90a", "12.5", compileOptions),
		"header":  cacheKey(hdr, "sm_90a", "12.5", compileOptions),
	}
	for what, k := range variants {
		if k == base {
			t.Errorf("changing the %s leaves the cache key unchanged", what)
		}
	}
}

// TestPrecompiledWithoutNVRTC: kernels precompiled into a folder serve a
// kernel cache that has no compiler, whatever NVRTC version built them;
// a folder without them gives an error that says NVRTC is missing.
func TestPrecompiledWithoutNVRTC(t *testing.T) {
	nvrtcOrSkip(t)
	dir := t.TempDir()
	files, err := PrecompileKernels(dir, "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(kernelFiles()) {
		t.Fatalf("%d files precompiled for %d kernel files", len(files), len(kernelFiles()))
	}
	offline := &kernelCache{dir: dir}
	for _, f := range kernelFiles() {
		img, cached, err := offline.image(f, "sm_90a")
		if err != nil || !cached || len(cubinFunctions(t, img)) == 0 {
			t.Fatalf("%s without NVRTC: cached=%v err=%v", f, cached, err)
		}
	}
	if _, _, err := (&kernelCache{dir: t.TempDir()}).image("rope.cu", "sm_90a"); !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("empty folder without NVRTC: error %v, want ErrNoNVRTC", err)
	}
}
