#!/usr/bin/env bash
# Runs the whole CUDA test suite on the host emulator, so every change
# re-checks the kernels' logic without a GPU:
#   1. NVRTC 12.5 from Debian experimental (non-free), unpacked with
#      dpkg-deb -x into .cudaemu/ at the repository root (ignored by git;
#      reused when present). dependencies.md §7 describes the recipe. apt
#      reads a private sources list and state folder there, so the machine's
#      apt configuration is left as it is and no dpkg lock is taken.
#   2. build.py compiles the kernels and the emulated libcuda/libcublas
#      with g++ into .cudaemu/emu/libcuda_emu.so.
#   3. go test ./cuda with R1GO_LIBCUDA, R1GO_CUBLAS and R1GO_NVRTC pointing
#      there: every GPU test runs (none may skip), and NVRTC compiles every
#      kernel for sm_90a and sm_80. The emulated driver logs every
#      allocation, and every chunk a VMM arena maps or unmaps, to
#      .cudaemu/alloc.log (R1GO_EMU_ALLOC_LOG).
#   4. The tensor-core tests (names with TC) again, with the threads of a
#      block run in reverse order (R1GO_EMU_ORDER=reverse) and any ldmatrix
#      bank conflict fatal (R1GO_EMU_BANKS=2): a missing barrier or wait
#      shows in one order or the other, and a tile left unswizzled fails.
#   5. TestGPUTrainingRepeats with every launch's blocks in a shuffled
#      order (R1GO_EMU_BLOCKS=shuffle): two runs of the same training
#      steps must give the same bits, so no reduction may depend on the
#      order blocks run in (a float atomic add across blocks would).
# Needs apt-get and dpkg-deb (Debian 12; as root it installs g++ and
# python3 when missing); R1GO_EMU_DIR moves
# the work folder. Extra arguments go to both go test runs (e.g. -run
# TestGPUSample: then the second runs that test, not every TC test).
set -euo pipefail
cd "$(dirname "$0")/../../.."
work="${R1GO_EMU_DIR:-$PWD/.cudaemu}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

# A fresh Debian 12 machine lacks the compiler (and, as a container, python3).
if ! command -v g++ >/dev/null || ! command -v python3 >/dev/null; then
	[ "$(id -u)" = 0 ] || { echo "ci.sh: needs g++ and python3 (apt-get install g++ python3)"; exit 1; }
	apt-get -qq update && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends g++ python3
fi

nvrtc="$work/nvrtc/usr/lib/x86_64-linux-gnu/libnvrtc.so.12"
if [ ! -e "$nvrtc" ]; then
	echo "== NVRTC 12.5 from Debian experimental into $work/nvrtc"
	apt="$work/apt"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs"
	cat >"$apt/experimental.sources" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: experimental
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt/none"
		-o "Dir::Etc::sourcelist=$apt/experimental.sources"
		-o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache"
		-o "Dir::State::status=/var/lib/dpkg/status" -o "Debug::NoLocking=1"
		-o "APT::Sandbox::User=root")
	mkdir -p "$apt/none"
	apt-get "${opts[@]}" -qq update
	(cd "$apt/debs" && apt-get "${opts[@]}" -qq download libnvrtc12 libnvrtc-builtins12.5)
	for deb in "$apt/debs"/*.deb; do dpkg-deb -x "$deb" "$work/nvrtc"; done
	[ -e "$nvrtc" ] || { echo "ci.sh: $nvrtc missing after unpacking"; exit 1; }
fi

echo "== build the CUDA emulator"
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" cuda/testdata/emu/build.py "$work/emu"

echo "== go test ./cuda ./benchmarks/gpubench ./benchmarks/cuda on the emulator"
export R1GO_LIBCUDA="$work/emu/libcuda_emu.so" R1GO_CUBLAS="$work/emu/libcuda_emu.so" R1GO_NVRTC="$nvrtc"
export R1GO_CUDA_CACHE="$work/cache" R1GO_EMU_STRICT=1 R1GO_EMU_ALLOC_LOG="$work/alloc.log"
# -p 1: both packages append to the one allocation log, which package cuda's plan test reads.
go test -count=1 -p 1 -timeout 20m "$@" ./cuda ./benchmarks/gpubench ./benchmarks/cuda

echo "== tensor-core tests again: threads in reverse order, bank conflicts fatal"
# (-skip NVRTC: "TC" also matches the NVRTC tests, which launch nothing.)
R1GO_EMU_ORDER=reverse R1GO_EMU_BANKS=2 go test -count=1 -p 1 -timeout 20m -run TC -skip NVRTC "$@" ./cuda ./benchmarks/gpubench

echo "== the training step repeats bit for bit with the blocks of every launch shuffled"
R1GO_EMU_BLOCKS=shuffle go test -count=1 -timeout 20m -run '^TestGPUTrainingRepeats$' "$@" ./cuda
