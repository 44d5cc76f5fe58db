package cuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The kernels are CUDA C++ files under kernels/, one per op, embedded in
// the binary. Headers (*.cuh) are handed to NVRTC by name, so a kernel
// file needs nothing from a CUDA toolkit: kernels/common.cuh defines the
// bf16 conversions and warp and block reductions they share.
//
//go:embed kernels/*.cu kernels/*.cuh
var kernelFS embed.FS

// compileOptions are the NVRTC options every kernel is built with. No
// fast-math: the kernels are tested against the CPU device and expf,
// logf and division must keep their IEEE accuracy.
var compileOptions = []string{"--std=c++17", "-default-device", "-lineinfo"}

// kernelSource returns the .cu file name (e.g. "rmsnorm.cu") with every
// header of kernels/.
func kernelSource(file string) (source, error) {
	text, err := kernelFS.ReadFile("kernels/" + file)
	if err != nil {
		return source{}, fmt.Errorf("cuda: no embedded kernel file %s", file)
	}
	src := source{name: file, text: string(text)}
	hs, _ := fs.Glob(kernelFS, "kernels/*.cuh")
	sort.Strings(hs)
	for _, h := range hs {
		b, _ := kernelFS.ReadFile(h)
		src.headers = append(src.headers, header{name: filepath.Base(h), text: string(b)})
	}
	return src, nil
}

// kernelFiles lists the embedded .cu files.
func kernelFiles() []string {
	fs, _ := fs.Glob(kernelFS, "kernels/*.cu")
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = filepath.Base(f)
	}
	sort.Strings(out)
	return out
}

// cacheKey names the compiled image of src: a hash of everything that
// changes the bytes NVRTC emits (the source and its headers, the options,
// the NVRTC version and the target architecture).
func cacheKey(src source, arch, nvrtcVersion string, opts []string) string {
	return sourceKey(src, arch, opts) + "-nvrtc" + nvrtcVersion
}

// sourceKey hashes what a kernel's image depends on apart from the NVRTC
// version: source, headers, options, architecture.
func sourceKey(src source, arch string, opts []string) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field("r1go-cuda-kernel-v1")
	field(src.name)
	field(src.text)
	for _, hd := range src.headers {
		field(hd.name)
		field(hd.text)
	}
	field(strings.Join(opts, "\x00"))
	field(arch)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// cacheDir is where compiled kernels are kept: R1GO_CUDA_CACHE, else
// r1go/cuda under the user's cache folder ($XDG_CACHE_HOME or ~/.cache).
func cacheDir() string {
	if d := os.Getenv("R1GO_CUDA_CACHE"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "r1go", "cuda")
}

// kernelCache compiles sources with NVRTC, or reads the image an earlier
// run stored under the same key. Without NVRTC (compiler nil) it serves
// images compiled earlier by any NVRTC version for the same source,
// options and architecture: CUBINs built on another machine and copied
// into the cache folder (PrecompileKernels) let a GPU box without NVRTC run.
type kernelCache struct {
	dir      string
	compiler *nvrtc
}

func imageExt(arch string) string {
	if strings.HasPrefix(arch, "compute_") {
		return ".ptx"
	}
	return ".cubin"
}

// image returns the compiled image of file for arch and whether it came
// from the disk cache. A cache that cannot be written is not an error:
// the kernel is simply compiled again next time.
func (kc *kernelCache) image(file, arch string) ([]byte, bool, error) {
	src, err := kernelSource(file)
	if err != nil {
		return nil, false, err
	}
	stem := filepath.Join(kc.dir, strings.TrimSuffix(file, ".cu")+"-"+arch+"-")
	if kc.compiler == nil {
		matches, _ := filepath.Glob(stem + sourceKey(src, arch, compileOptions) + "-nvrtc*" + imageExt(arch))
		sort.Strings(matches)
		for j := len(matches) - 1; j >= 0; j-- {
			if b, err := os.ReadFile(matches[j]); err == nil && len(b) > 0 {
				return b, true, nil
			}
		}
		return nil, false, fmt.Errorf("%w, and %s holds no compiled %s for %s", ErrNoNVRTC, kc.dir, file, arch)
	}
	path := stem + cacheKey(src, arch, kc.compiler.version(), compileOptions) + imageExt(arch)
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
		return b, true, nil
	}
	img, err := kc.compiler.compile(src, arch, compileOptions)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(kc.dir, 0o755); err == nil {
		tmp, err := os.CreateTemp(kc.dir, ".tmp-*")
		if err == nil {
			_, werr := tmp.Write(img)
			tmp.Chmod(0o644) //nolint:errcheck // readable by others is a convenience
			cerr := tmp.Close()
			if werr == nil && cerr == nil {
				os.Rename(tmp.Name(), path) //nolint:errcheck // a lost cache entry only costs a recompile
			} else {
				os.Remove(tmp.Name())
			}
		}
	}
	return img, false, nil
}

// PrecompileKernels compiles every embedded kernel for arch (e.g. "sm_90a")
// with the NVRTC this machine has, into the cache folder dir, and returns
// the files written. Copying dir to a GPU machine and pointing
// R1GO_CUDA_CACHE at it lets that machine run without NVRTC.
func PrecompileKernels(dir, arch string) ([]string, error) {
	c, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	kc := &kernelCache{dir: dir, compiler: c}
	var out []string
	for _, f := range kernelFiles() {
		if _, _, err := kc.image(f, arch); err != nil {
			return out, err
		}
		src, _ := kernelSource(f)
		out = append(out, filepath.Join(dir, strings.TrimSuffix(f, ".cu")+"-"+arch+"-"+cacheKey(src, arch, c.version(), compileOptions)+imageExt(arch)))
	}
	for _, f := range out {
		if _, err := os.Stat(f); err != nil {
			return out, fmt.Errorf("cuda: precompiled kernel not written: %v", err)
		}
	}
	return out, nil
}

// archFor is the NVRTC target for a compute capability: the
// architecture-specific variant (sm_90a) on Hopper, whose wgmma and TMA
// instructions exist only there, and plain sm_XY elsewhere.
func archFor(major, minor int) string {
	if major == 9 && minor == 0 {
		return "sm_90a"
	}
	return fmt.Sprintf("sm_%d%d", major, minor)
}
