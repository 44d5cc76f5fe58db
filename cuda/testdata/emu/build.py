#!/usr/bin/env python3
"""Builds libcuda_emu.so: the r1go kernels compiled for the host with g++
over cuda_emu.h, plus an emulated libcuda/libcublas (runtime.cc). With it
the package's GPU tests run on a CPU-only machine. ci.sh (run by .ci/run)
does all of it, NVRTC included; by hand:

    python3 cuda/testdata/emu/build.py /tmp/emu
    R1GO_LIBCUDA=/tmp/emu/libcuda_emu.so R1GO_CUBLAS=/tmp/emu/libcuda_emu.so \\
        R1GO_NVRTC=<libnvrtc.so.12> go test ./cuda -run GPU

(NVRTC still compiles the real kernels; the emulator ignores the images and
runs its own build of the same sources.) R1GO_EMU_ALLOC_LOG=<file> makes
the emulated driver log every cuMemAlloc and cuMemFree, and every chunk a
VMM arena maps and unmaps (runtime.cc). It checks the kernels' logic and
the launchers' argument order against the CPU device; it measures nothing.
"""
import glob, os, re, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
kernels = os.path.join(here, "..", "..", "kernels")
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r1go-cuda-emu"
os.makedirs(out, exist_ok=True)

parts = ['#include "cuda_emu.h"', "#include <utility>", "#include <type_traits>"]
common = open(os.path.join(kernels, "common.cuh")).read().replace("#pragma once", "")
parts.append(common)
names = []
for f in sorted(glob.glob(os.path.join(kernels, "*.cu"))):
    src = open(f).read()
    src = src.replace('#include "common.cuh"', "")
    # Dynamic shared memory becomes a pointer into the block's buffer.
    src = re.sub(r"extern __shared__ (\w+) (\w+)\[\];", r"\1* \2 = (\1*)emu_smem();", src)
    names += re.findall(r'extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(', src)
    parts.append("// ---- " + os.path.basename(f) + "\n" + src)
    # Macros of one file (tile sizes) end with it.
    for m in re.findall(r"^#define (\w+)", src, re.M):
        parts.append("#undef " + m)
parts.append("""
template <class... A, std::size_t... I>
static void invoke_impl(void (*f)(A...), void** p, std::index_sequence<I...>) {
    f(*static_cast<std::remove_reference_t<A>*>(p[I])...);
}
template <class... A> static void invoke(void (*f)(A...), void** p) { invoke_impl(f, p, std::index_sequence_for<A...>{}); }
template <class... A> static constexpr int arity(void (*)(A...)) { return sizeof...(A); }
struct KernelEntry { const char* name; void (*invoke)(void**); int arity; };
KernelEntry emu_kernels[] = {""")
for n in names:
    parts.append('    {"%s", [](void** p) { invoke(&%s, p); }, arity(&%s)},' % (n, n, n))
parts.append("};\nint emu_num_kernels = %d;\n" % len(names))
tu = os.path.join(out, "kernels_emu.cc")
open(tu, "w").write("\n".join(parts))
lib = os.path.join(out, "libcuda_emu.so")
cmd = ["g++", "-std=c++20", "-O2", "-g", "-fPIC", "-shared", "-pthread", "-I", here, "-o", lib, tu, os.path.join(here, "runtime.cc")]
subprocess.run(cmd, check=True)
print(lib, "with", len(names), "kernels")
