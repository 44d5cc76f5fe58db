#!/usr/bin/env python3
"""Builds libcuda_emu.so: the r1go kernels compiled for the host with g++
over cuda_emu.h, plus an emulated libcuda/libcublas (runtime.cc). With it
the package's GPU tests run on a CPU-only machine. ci.sh (run by .ci/run)
does all of it, NVRTC included; by hand:

    python3 cuda/testdata/emu/build.py /tmp/emu
    R1GO_LIBCUDA=/tmp/emu/libcuda_emu.so R1GO_CUBLAS=/tmp/emu/libcuda_emu.so \\
        R1GO_NVRTC=<libnvrtc.so.12> go test ./cuda -run GPU

(NVRTC still compiles the real kernels; the emulator ignores the images and
runs its own build of the same sources; runtime.cc is its libcuda, blas.cc
its libcublas.) The translation unit is the
headers of kernels/ (tc.cuh replaced by tc_emu.h, the tensor-core
primitives with the checks a GPU does not make; every other header once,
after those it includes), then every .cu file, each under #line directives
so that compiler messages, debuggers and the emulator's own reports name
the kernel sources. R1GO_EMU_ALLOC_LOG=<file> makes the emulated driver log
every cuMemAlloc and cuMemFree, and every chunk a VMM arena maps and unmaps;
R1GO_EMU_ORDER, R1GO_EMU_BANKS and R1GO_EMU_STATS are described in
runtime.cc and tc_emu.h. It checks the kernels' logic and the launchers'
argument order against the CPU device; it measures nothing.
"""
import glob, os, re, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
kernels = os.path.join(here, "..", "..", "kernels")
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r1go-cuda-emu"
os.makedirs(out, exist_ok=True)

INCLUDE = re.compile(r'^#include "(\w+\.cuh)"[ \t]*$', re.M)


def blank_includes(src):
    # Every header is in the prelude already; the line stays, empty, so
    # that line numbers keep matching the file.
    return INCLUDE.sub("", src).replace("#pragma once", "")


def located(name, src):
    return '#line 1 "cuda/kernels/%s"\n%s' % (name, src)


parts = ['#include "cuda_emu.h"', '#include "tc_emu.h"', "#include <utility>", "#include <type_traits>"]
headers = {os.path.basename(f): open(f).read() for f in glob.glob(os.path.join(kernels, "*.cuh"))}
done = {"tc.cuh"}


def add_header(name, chain=()):
    if name in done:
        return
    if name in chain or name not in headers:
        sys.exit("build.py: header %s %s" % (name, "includes itself" if name in chain else "not in kernels/"))
    for dep in INCLUDE.findall(headers[name]):
        add_header(dep, chain + (name,))
    done.add(name)
    parts.append(located(name, blank_includes(headers[name])))


for h in ["common.cuh"] + sorted(headers):
    add_header(h)

names = []
for f in sorted(glob.glob(os.path.join(kernels, "*.cu"))):
    src = blank_includes(open(f).read())
    # Dynamic shared memory becomes a pointer into the block's buffer.
    src = re.sub(r"extern __shared__ (?:__align__\(\d+\) )?(\w+(?: \w+)?) (\w+)\[\];", r"\1* \2 = (\1*)emu_smem();", src)
    names += re.findall(r'extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(', src)
    parts.append(located(os.path.basename(f), src))
    # Macros of one file (tile sizes) end with it.
    for m in re.findall(r"^#define (\w+)", src, re.M):
        parts.append("#undef " + m)
tu = os.path.join(out, "kernels_emu.cc")
registry = """
template <class... A, std::size_t... I>
static void invoke_impl(void (*f)(A...), void** p, std::index_sequence<I...>) {
    f(*static_cast<std::remove_reference_t<A>*>(p[I])...);
}
template <class... A> static void invoke(void (*f)(A...), void** p) { invoke_impl(f, p, std::index_sequence_for<A...>{}); }
template <class... A> static constexpr int arity(void (*)(A...)) { return sizeof...(A); }
struct KernelEntry { const char* name; void (*invoke)(void**); int arity; };
KernelEntry emu_kernels[] = {"""
lines = sum(p.count("\n") + 1 for p in parts)
parts.append('#line %d "%s"' % (lines + 2, tu) + registry)
for n in names:
    parts.append('    {"%s", [](void** p) { invoke(&%s, p); }, arity(&%s)},' % (n, n, n))
parts.append("};\nint emu_num_kernels = %d;\n" % len(names))
open(tu, "w").write("\n".join(parts))
lib = os.path.join(out, "libcuda_emu.so")
cmd = ["g++", "-std=c++20", "-O2", "-g", "-fPIC", "-shared", "-pthread", "-I", here, "-o", lib, tu, os.path.join(here, "runtime.cc"), os.path.join(here, "blas.cc")]
subprocess.run(cmd, check=True)
print(lib, "with", len(names), "kernels")
