// The emulated libcuda and libcublas: just the entry points package cuda
// binds, over host memory, running kernels from the registry that build.py
// generates. Launches run synchronously; a stream is a no-op; graph capture
// records launches and replays them.
//
// R1GO_EMU_ORDER=reverse runs a block's threads last to first between
// barriers (the default, forward, first to last): a missing barrier, or a
// read of cp.async data before its wait, shows in one order or the other.
// R1GO_EMU_BLOCKS=shuffle runs a launch's blocks in a pseudo-random order,
// another for every launch (the default, ordered: x fastest, then y, z): a
// result that depends on the order blocks run in, such as a float atomic
// add from several blocks into one sum, then differs between two runs of
// the same step, as it may on a GPU.
// R1GO_EMU_STATS=<file> gets the tensor-core counters of tc_emu.h, one line
// per launch that used them and a total at exit; R1GO_EMU_BANKS is read
// there.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <functional>
#include <map>
#include <mutex>
#include <vector>
#include <sys/mman.h>
#include "cuda_emu.h"
#include "tc_emu.h"

uint3 threadIdx, blockIdx, blockDim, gridDim;

struct KernelEntry { const char* name; void (*invoke)(void**); int arity; };
extern KernelEntry emu_kernels[];
extern int emu_num_kernels;

// Switching fibers: ucontext's swapcontext saves and restores the signal
// mask with a system call on every switch, which dominated the run time
// (millions of switches per test). emu_switch saves the callee-saved
// registers of the System V x86-64 ABI on the current stack, stores the
// stack pointer in *from and resumes the stack saved in to.
extern "C" void emu_switch(void** from, void* to);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_switch,.-emu_switch
)");

// A cp.async copy in flight: it lands when its thread waits for its group.
struct CpCopy {
    char* dst;
    const char* src;
    int src_bytes;
    unsigned group;
};

// One CUDA thread: a fiber and what it waits for.
enum State { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };
struct Fiber {
    void* sp; // saved stack pointer while switched out
    std::vector<char> stack;
    State state;
    uint3 tid;
    EmuSite at;        // the collective it waits at (op nullptr: a warp shuffle)
    unsigned seq;      // warp-collective instructions executed
    std::vector<CpCopy> cp; // copies in flight, oldest first from cpHead
    size_t cpHead;
    unsigned cpGroup;  // the open group; groups below it are committed
};

static void* scheduler;
static std::vector<Fiber> fibers;
static int current;
static int nthreads;
static char* smem;
static size_t smemCap, smemSize;
static std::vector<uint64_t> slots;          // 32 exchange slots per warp
static std::vector<EmuWarpSlots> warpSlots;  // two sets per warp (tc_emu.h)
static KernelEntry* launching;
static void** launchParams;
EmuTCStats tc_stats;

void* emu_smem() { return smem; }
static void park(State s) {
    fibers[current].state = s;
    emu_switch(&fibers[current].sp, scheduler);
}
void emu_syncthreads() { park(AT_BLOCK_BARRIER); }
void emu_warp_sync() {
    fibers[current].at = EmuSite{nullptr, nullptr, 0};
    park(AT_WARP_BARRIER);
}
void* emu_warp_slot(int lane) { return &slots[(current / 32) * 32 + lane]; }

void emu_fail(const char* fmt, ...) {
    uint3 t = current < nthreads ? fibers[current].tid : uint3{0, 0, 0};
    fprintf(stderr, "cuda emulator: %s, block (%u,%u,%u), thread (%u,%u,%u) (warp %d, lane %d): ", launching ? launching->name : "?",
            blockIdx.x, blockIdx.y, blockIdx.z, t.x, t.y, t.z, current / 32, current % 32);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}
unsigned long long __cvta_generic_to_shared(const void* p) {
    if (!emu_in_smem(p, 0)) emu_fail("__cvta_generic_to_shared of %p, outside the block's dynamic shared memory", p);
    return (unsigned long long)emu_smem_offset(p);
}
char* emu_smem_base() { return smem; }
long long emu_smem_size() { return (long long)smemSize; }

// Warp-collective instructions (tc_emu.h).
EmuWarpSlots* emu_warp_slots(unsigned seq) { return &warpSlots[(current / 32) * 2 + (seq & 1)]; }
static bool slotsUsed = true;
unsigned emu_next_seq() {
    slotsUsed = true;
    return fibers[current].seq++;
}
void emu_warp_sync_at(const EmuSite& s) {
    fibers[current].at = s;
    park(AT_WARP_BARRIER);
}
int emu_warp_size() { return std::min(32, nthreads - current / 32 * 32); }
// emu_lane_state says where a lane of the calling warp is: a lane released
// with this one from a warp barrier is still described by that barrier.
const char* emu_lane_state(int lane) {
    static char buf[512];
    int t = current / 32 * 32 + lane;
    if (t >= nthreads) return "does not exist (the block's last warp is partial)";
    const Fiber& f = fibers[t];
    if (f.state == DONE) return "has exited";
    if (f.state == AT_BLOCK_BARRIER) return "is at __syncthreads";
    if (!f.at.op) return "is at a warp shuffle";
    snprintf(buf, sizeof buf, "is at %s (%s:%d), its warp-collective instruction #%u", f.at.op, f.at.file, f.at.line, f.seq - 1);
    return buf;
}

// cp.async, per thread: the destination is poisoned (NaN bytes) at issue
// and the data lands when a wait retires the copy's group; bytes past
// src_bytes are zeroed. The source is read when the data lands.
void emu_cp_async(void* dst, const void* src, int src_bytes) {
    Fiber& f = fibers[current];
    memset(dst, 0xff, 16);
    f.cp.push_back({(char*)dst, (const char*)src, src_bytes, f.cpGroup});
}
void emu_cp_commit() { fibers[current].cpGroup++; }
// emu_cp_wait retires every committed group but the n newest; copies not
// yet committed stay in flight, as cp.async.wait_group leaves them.
void emu_cp_wait(int n) {
    Fiber& f = fibers[current];
    if (f.cpGroup <= (unsigned)n) return;
    unsigned below = f.cpGroup - n;
    while (f.cpHead < f.cp.size() && f.cp[f.cpHead].group < below) {
        CpCopy& c = f.cp[f.cpHead++];
        memcpy(c.dst, c.src, c.src_bytes);
        memset(c.dst + c.src_bytes, 0, 16 - c.src_bytes);
    }
    if (f.cpHead == f.cp.size()) f.cp.clear(), f.cpHead = 0;
}
int emu_bank_mode() {
    static int m = [] {
        const char* e = getenv("R1GO_EMU_BANKS");
        if (!e || !*e) return 1;
        if (strcmp(e, "0") && strcmp(e, "1") && strcmp(e, "2")) {
            fprintf(stderr, "cuda emulator: R1GO_EMU_BANKS=%s, want 0 (no count), 1 (count) or 2 (abort at a conflict)\n", e);
            abort();
        }
        return atoi(e);
    }();
    return m;
}
// env_switch reads a two-way setting of the environment: false when unset,
// empty or off, true when on; any other value aborts, naming both.
static bool env_switch(const char* name, const char* off, const char* on) {
    const char* e = getenv(name);
    if (!e || !*e || !strcmp(e, off)) return false;
    if (!strcmp(e, on)) return true;
    fprintf(stderr, "cuda emulator: %s=%s, want %s or %s\n", name, e, off, on);
    abort();
}
static bool reverse_order() {
    static bool r = env_switch("R1GO_EMU_ORDER", "forward", "reverse");
    return r;
}
static bool shuffle_blocks() {
    static bool r = env_switch("R1GO_EMU_BLOCKS", "ordered", "shuffle");
    return r;
}

// splitmix64 draws the shuffled block orders: a launch's order comes from
// the number of launches before it.
static uint64_t splitmix64(uint64_t& s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t launches;

static void fiber_main() {
    launching->invoke(launchParams);
    fibers[current].state = DONE;
    emu_switch(&fibers[current].sp, scheduler);
    abort(); // a finished fiber is never resumed
}

// fiber_init lays out a fresh stack so that the first emu_switch to it
// pops six zero registers and "returns" into fiber_main with the stack
// aligned as at a function's entry.
static void fiber_init(Fiber& f) {
    uintptr_t top = ((uintptr_t)f.stack.data() + f.stack.size()) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = nullptr;               // fiber_main's return address: never used
    *--sp = (void*)&fiber_main;    // where emu_switch's ret lands
    for (int r = 0; r < 6; r++) *--sp = nullptr;
    f.sp = sp;
}

// run_block runs every thread of one block to completion, releasing a
// barrier when every live thread of its scope has reached it.
static void run_block(int n) {
    for (int t = 0; t < n; t++) {
        Fiber& f = fibers[t];
        fiber_init(f);
        f.state = RUNNABLE;
        f.tid = {(unsigned)(t % blockDim.x), (unsigned)(t / blockDim.x % blockDim.y), (unsigned)(t / (blockDim.x * blockDim.y))};
        f.seq = 0;
        f.cp.clear();
        f.cpHead = 0;
        f.cpGroup = 0;
    }
    if (slotsUsed) warpSlots.assign(warpSlots.size(), EmuWarpSlots{}); // no deposit of the last block may pass for this one's
    slotsUsed = false;
    int nw = (n + 31) / 32;
    bool reverse = reverse_order();
    for (;;) {
        bool ran = false;
        for (int i = 0; i < n; i++) {
            int t = reverse ? n - 1 - i : i;
            if (fibers[t].state != RUNNABLE) continue;
            current = t;
            threadIdx = fibers[t].tid;
            emu_switch(&scheduler, fibers[t].sp);
            ran = true;
        }
        if (ran) continue;
        bool released = false;
        for (int w = 0; w < nw; w++) {
            int lo = w * 32, hi = std::min(n, lo + 32), waiting = 0, live = 0;
            for (int t = lo; t < hi; t++) {
                live += fibers[t].state != DONE;
                waiting += fibers[t].state == AT_WARP_BARRIER;
            }
            if (waiting > 0 && waiting == live) {
                for (int t = lo; t < hi; t++) if (fibers[t].state == AT_WARP_BARRIER) fibers[t].state = RUNNABLE;
                released = true;
            }
        }
        if (released) continue;
        int waiting = 0, live = 0;
        for (int t = 0; t < n; t++) {
            live += fibers[t].state != DONE;
            waiting += fibers[t].state == AT_BLOCK_BARRIER;
        }
        if (live == 0) return;
        if (waiting == live) {
            for (int t = 0; t < n; t++) if (fibers[t].state == AT_BLOCK_BARRIER) fibers[t].state = RUNNABLE;
            continue;
        }
        fprintf(stderr, "cuda emulator: deadlock in %s block (%u,%u,%u): %d of %d live threads at __syncthreads, the rest at a warp barrier\n",
                launching->name, blockIdx.x, blockIdx.y, blockIdx.z, waiting, live);
        for (int t = 0; t < n; t++) {
            const Fiber& f = fibers[t];
            if (f.state != AT_WARP_BARRIER) continue;
            if (f.at.op) fprintf(stderr, "  thread %d (warp %d, lane %d) waits at %s (%s:%d)\n", t, t / 32, t % 32, f.at.op, f.at.file, f.at.line);
            else fprintf(stderr, "  thread %d (warp %d, lane %d) waits at a warp shuffle\n", t, t / 32, t % 32);
        }
        abort();
    }
}

// R1GO_EMU_STATS: one line of counters per launch that used a tensor-core
// instruction, and the sums over the process at exit, as key=value pairs.
static EmuTCStats tc_total;
static void stats_line(FILE* f, const char* head, const EmuTCStats& s) {
    fprintf(f, "%s mma=%lld ldmatrix=%lld phases=%lld extra_wavefronts=%lld cp_async=%lld cp_async_bytes=%lld red=%lld\n", head, s.mma,
            s.ldmatrix, s.phases, s.extra_wavefronts, s.cp_async, s.cp_async_bytes, s.red);
    fflush(f);
}
static FILE* stats_file() {
    static FILE* f = [] {
        const char* p = getenv("R1GO_EMU_STATS");
        FILE* f = p && *p ? fopen(p, "w") : nullptr;
        if (f) atexit([] { stats_line(stats_file(), "total", tc_total); });
        return f;
    }();
    return f;
}
static void report_launch(KernelEntry* k, int gx, int gy, int gz, int bx, int by, int bz) {
    const EmuTCStats& s = tc_stats;
    if (!(s.mma | s.ldmatrix | s.cp_async | s.red)) return;
    tc_total.mma += s.mma, tc_total.ldmatrix += s.ldmatrix, tc_total.phases += s.phases;
    tc_total.extra_wavefronts += s.extra_wavefronts, tc_total.cp_async += s.cp_async;
    tc_total.cp_async_bytes += s.cp_async_bytes, tc_total.red += s.red;
    if (FILE* f = stats_file()) {
        char head[256];
        snprintf(head, sizeof head, "launch kernel=%s grid=%d,%d,%d block=%d,%d,%d", k->name, gx, gy, gz, bx, by, bz);
        stats_line(f, head, s);
    }
}

static void run_launch(KernelEntry* k, int gx, int gy, int gz, int bx, int by, int bz, int smemBytes, void** params) {
    int n = bx * by * bz;
    if ((int)fibers.size() < n) {
        fibers.resize(n);
        for (auto& f : fibers) if (f.stack.empty()) f.stack.resize(256 << 10);
    }
    slots.assign(((n + 31) / 32) * 32, 0);
    warpSlots.resize((n + 31) / 32 * 2);
    nthreads = n;
    // Aligned as a GPU's shared window, so that a row's alignment and bank
    // are those of its offset.
    if (smemCap < (size_t)smemBytes + 16) {
        free(smem);
        smemCap = ((size_t)smemBytes + 16 + 1023) / 1024 * 1024;
        smem = (char*)aligned_alloc(1024, smemCap);
    }
    smemSize = smemBytes;
    launching = k;
    launchParams = params;
    blockDim = {(unsigned)bx, (unsigned)by, (unsigned)bz};
    gridDim = {(unsigned)gx, (unsigned)gy, (unsigned)gz};
    tc_stats = EmuTCStats{};
    long long nb = (long long)gx * gy * gz;
    std::vector<long long> order; // shuffled block indices; empty: in order
    if (shuffle_blocks()) {
        order.resize(nb);
        for (long long b = 0; b < nb; b++) order[b] = b;
        uint64_t st = ++launches;
        for (long long b = nb - 1; b > 0; b--) std::swap(order[b], order[splitmix64(st) % (uint64_t)(b + 1)]);
    }
    for (long long i = 0; i < nb; i++) {
        long long b = order.empty() ? i : order[i];
        memset(smem, 0xff, smemBytes + 16); // NaN-filled: reading unwritten shared memory shows
        blockIdx = {(unsigned)(b % gx), (unsigned)(b / gx % gy), (unsigned)(b / ((long long)gx * gy))};
        run_block(n);
    }
    report_launch(k, gx, gy, gz, bx, by, bz);
}

// A captured launch, or a captured cuBLAS call (fn).
struct Recorded { KernelEntry* k; int g[3], b[3], smem; std::vector<uint64_t> vals; std::function<void()> fn; };
static bool capturing = false;
static std::vector<Recorded>* recording;

extern "C" {
typedef int CUresult;
CUresult cuInit(unsigned) { return 0; }
CUresult cuDriverGetVersion(int* v) { *v = 12050; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int o) { *d = o; return o == 0 ? 0 : 101; }
static bool vmm_off() { const char* e = getenv("R1GO_EMU_NO_VMM"); return e && *e == '1'; }
CUresult cuDeviceGetAttribute(int* v, int attr, int) {
    switch (attr) {
    case 102: *v = !vmm_off(); break; // virtual memory management
    case 75: *v = 9; break;      // compute capability major
    case 76: *v = 0; break;      // minor
    case 16: *v = 2; break;      // SMs: small grids keep the emulation quick
    case 97: *v = 232448; break; // shared memory per block, opt-in
    default: *v = 0;
    }
    return 0;
}
CUresult cuDeviceGetName(char* s, int n, int) { snprintf(s, n, "r1go CUDA emulator"); return 0; }
CUresult cuDeviceTotalMem_v2(size_t* b, int) { *b = 1ull << 34; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** c, int) { *c = (void*)1; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
CUresult cuCtxSetCurrent(void*) { return 0; }
CUresult cuCtxSynchronize() { return 0; }
CUresult cuStreamCreate(void** s, unsigned) { *s = (void*)2; return 0; }
CUresult cuStreamSynchronize(void*) { return capturing ? 900 : 0; }
CUresult cuStreamDestroy_v2(void*) { return 0; }
// R1GO_EMU_ALLOC_LOG names a file that gets one line per allocation
// ("alloc <address> <bytes>") and per free ("free <address>"), so a
// memory plan can be checked against what the device code allocates.
static FILE* alloc_log() {
    static FILE* f = [] { const char* p = getenv("R1GO_EMU_ALLOC_LOG"); return p && *p ? fopen(p, "w") : (FILE*)nullptr; }();
    return f;
}
// Live cuMemAlloc allocations (base → bytes asked for), for the address
// checks of cp.async and red (emu_in_global).
static std::mutex alloc_mu;
static std::map<uint64_t, size_t> live_allocs;
CUresult cuMemAlloc_v2(uint64_t* p, size_t n) {
    void* m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return 2;
    { std::lock_guard<std::mutex> g(alloc_mu); live_allocs[(uint64_t)m] = n; }
    memset(m, 0xff, n); // NaN-filled: reading memory nobody wrote shows
    *p = (uint64_t)m;
    if (FILE* f = alloc_log()) { fprintf(f, "alloc %#llx %zu\n", (unsigned long long)*p, n); fflush(f); }
    return 0;
}
CUresult cuMemFree_v2(uint64_t p) {
    if (capturing) return 900;
    if (FILE* f = alloc_log()) { fprintf(f, "free %#llx\n", (unsigned long long)p); fflush(f); }
    { std::lock_guard<std::mutex> g(alloc_mu); live_allocs.erase(p); }
    free((void*)p);
    return 0;
}
// Virtual memory management over host mappings. cuMemAddressReserve
// reserves inaccessible address space; cuMemMap puts fresh anonymous
// memory (NaN-filled, as cuMemAlloc's) at a chunk of it, still
// inaccessible until cuMemSetAccess opens it; cuMemUnmap replaces the
// chunk with inaccessible space again, returning its pages to the host, so
// a kernel or copy that touches given-back memory faults as on a GPU. A
// handle is only its size: each is mapped at one place, so nothing needs
// two views of the same memory. The allocation log gets "reserve <address>
// <bytes>", "map <address> <bytes>", "unmap <address> <bytes>" and
// "unreserve <address>": the mapped bytes are the device memory in use.
// R1GO_EMU_VMM_CHUNK sets the granularity (default 64 KiB, small so that
// small test models span many chunks); R1GO_EMU_NO_VMM=1 reports no VMM.
static std::mutex vmm_mu;
static std::map<uint64_t, size_t> reserved, mapped; // base → bytes
static std::map<uint64_t, size_t> handles;          // handle → bytes
static uint64_t next_handle = 1;
static size_t vmm_chunk() {
    const char* e = getenv("R1GO_EMU_VMM_CHUNK");
    size_t c = e && *e ? strtoull(e, nullptr, 10) : 64 << 10;
    return c < 4096 ? 4096 : c / 4096 * 4096;
}
static void vmm_log(const char* what, uint64_t p, size_t n) {
    if (FILE* f = alloc_log()) { fprintf(f, "%s %#llx %zu\n", what, (unsigned long long)p, n); fflush(f); }
}
// inside finds the reservation holding [p, p+n).
static bool inside(uint64_t p, size_t n) {
    auto it = reserved.upper_bound(p);
    if (it == reserved.begin()) return false;
    --it;
    return p >= it->first && p + n <= it->first + it->second;
}
// overlaps says whether [p, p+n) meets a mapping.
static bool overlaps(uint64_t p, size_t n) {
    auto it = mapped.lower_bound(p + n);
    if (it == mapped.begin()) return false;
    --it;
    return it->first + it->second > p;
}
// covered says whether [p, p+n) is wholly mapped.
static bool covered(uint64_t p, size_t n) {
    uint64_t at = p;
    while (at < p + n) {
        auto it = mapped.upper_bound(at);
        if (it == mapped.begin()) return false;
        --it;
        if (it->first + it->second <= at) return false;
        at = it->first + it->second;
    }
    return true;
}
}
// emu_in_global says whether [p, p+n) lies in one live cuMemAlloc
// allocation or in mapped VMM chunks.
bool emu_in_global(const void* p, size_t n) {
    uint64_t a = (uint64_t)p;
    {
        std::lock_guard<std::mutex> g(alloc_mu);
        auto it = live_allocs.upper_bound(a);
        if (it != live_allocs.begin() && (--it, a >= it->first && a + n <= it->first + it->second)) return true;
    }
    std::lock_guard<std::mutex> g(vmm_mu);
    return covered(a, n);
}
extern "C" {
CUresult cuMemGetAllocationGranularity(size_t* g, const void*, int) { *g = vmm_chunk(); return 0; }
CUresult cuMemAddressReserve(uint64_t* p, size_t n, size_t align, uint64_t, unsigned long long) {
    std::lock_guard<std::mutex> g(vmm_mu);
    size_t c = vmm_chunk();
    if (n == 0 || n % c || (align && align % c)) return 1;
    size_t a = align ? align : c;
    void* m = mmap(nullptr, n + a, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return 2;
    uint64_t base = ((uint64_t)m + a - 1) / a * a;
    if (base > (uint64_t)m) munmap(m, base - (uint64_t)m);
    if ((uint64_t)m + n + a > base + n) munmap((void*)(base + n), (uint64_t)m + n + a - (base + n));
    reserved[base] = n;
    *p = base;
    vmm_log("reserve", base, n);
    return 0;
}
CUresult cuMemAddressFree(uint64_t p, size_t n) {
    std::lock_guard<std::mutex> g(vmm_mu);
    auto it = reserved.find(p);
    if (it == reserved.end() || it->second != n) return 1;
    if (overlaps(p, n)) { fprintf(stderr, "cuda emulator: cuMemAddressFree of %#llx with chunks still mapped\n", (unsigned long long)p); return 1; }
    munmap((void*)p, n);
    reserved.erase(it);
    vmm_log("unreserve", p, n);
    return 0;
}
CUresult cuMemCreate(uint64_t* h, size_t n, const void*, unsigned long long) {
    std::lock_guard<std::mutex> g(vmm_mu);
    if (n == 0 || n % vmm_chunk()) return 1;
    *h = next_handle++;
    handles[*h] = n;
    return 0;
}
CUresult cuMemRelease(uint64_t h) {
    std::lock_guard<std::mutex> g(vmm_mu);
    return handles.erase(h) ? 0 : 1;
}
CUresult cuMemMap(uint64_t p, size_t n, size_t off, uint64_t h, unsigned long long) {
    std::lock_guard<std::mutex> g(vmm_mu);
    auto hi = handles.find(h);
    if (hi == handles.end() || off != 0 || hi->second != n || !inside(p, n) || overlaps(p, n)) return 1;
    if (mmap((void*)p, n, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) return 2;
    memset((void*)p, 0xff, n); // NaN-filled: reading memory nobody wrote shows
    mprotect((void*)p, n, PROT_NONE);
    mapped[p] = n;
    vmm_log("map", p, n);
    return 0;
}
CUresult cuMemSetAccess(uint64_t p, size_t n, const void*, size_t count) {
    std::lock_guard<std::mutex> g(vmm_mu);
    if (count != 1 || !covered(p, n)) return 1;
    return mprotect((void*)p, n, PROT_READ | PROT_WRITE) == 0 ? 0 : 1;
}
CUresult cuMemUnmap(uint64_t p, size_t n) {
    std::lock_guard<std::mutex> g(vmm_mu);
    auto it = mapped.find(p);
    if (it == mapped.end() || it->second != n) return 1; // whole mappings only
    if (capturing) return 900;
    if (mmap((void*)p, n, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED) return 2;
    mapped.erase(it);
    vmm_log("unmap", p, n);
    return 0;
}
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) { *f = *t = 1ull << 34; return 0; }
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void* s, size_t n, void*) { if (capturing) return 900; memcpy((void*)d, s, n); return 0; }
CUresult cuMemcpyDtoHAsync_v2(void* d, uint64_t s, size_t n, void*) { if (capturing) return 900; memcpy(d, (void*)s, n); return 0; }
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void*) { memmove((void*)d, (void*)s, n); return 0; }
CUresult cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void*) {
    unsigned* p = (unsigned*)d;
    for (size_t i = 0; i < n; i++) p[i] = v;
    return 0;
}
CUresult cuModuleLoadData(void** m, const void*) { *m = (void*)3; return 0; }
CUresult cuModuleGetFunction(void** f, void*, const char* name) {
    for (int i = 0; i < emu_num_kernels; i++)
        if (std::string(emu_kernels[i].name) == name) { *f = &emu_kernels[i]; return 0; }
    return 500; // CUDA_ERROR_NOT_FOUND
}
CUresult cuModuleUnload(void*) { return 0; }
CUresult cuFuncSetAttribute(void*, int, int) { return 0; }
// Devices opened on several goroutines (the data-parallel tests' ranks)
// launch from several OS threads; the fibers and the block state are
// global, so launches run one at a time.
static std::recursive_mutex launch_mu;
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned smem, void*, void** params, void**) {
    std::lock_guard<std::recursive_mutex> g(launch_mu);
    KernelEntry* k = (KernelEntry*)f;
    if (bx * by * bz > 1024 || bx * by * bz == 0) return 1; // CUDA_ERROR_INVALID_VALUE
    if (capturing) {
        Recorded r{k, {(int)gx, (int)gy, (int)gz}, {(int)bx, (int)by, (int)bz}, (int)smem, {}};
        for (int i = 0; i < k->arity; i++) r.vals.push_back(*(uint64_t*)params[i]);
        recording->push_back(r);
        return 0;
    }
    run_launch(k, gx, gy, gz, bx, by, bz, smem, params);
    return 0;
}
CUresult cuGetErrorName(int e, const char** s) { static char b[32]; snprintf(b, 32, "EMU_ERROR_%d", e); *s = b; return 0; }
CUresult cuGetErrorString(int, const char** s) { *s = "emulated CUDA error"; return 0; }
CUresult cuEventCreate(void** e, unsigned) { *e = (void*)4; return 0; }
CUresult cuEventRecord(void*, void*) { return 0; }
CUresult cuEventSynchronize(void*) { return 0; }
// Launches run synchronously, so every event has passed; R1GO_EMU_EVENTS_LAG=1
// makes cuEventQuery say "not ready" (600) all the same, as a busy GPU would,
// so that code waiting on events shows it can wait (cuEventSynchronize).
CUresult cuEventQuery(void*) { const char* e = getenv("R1GO_EMU_EVENTS_LAG"); return e && *e == '1' ? 600 : 0; }
CUresult cuEventElapsedTime_v2(float* ms, void*, void*) { *ms = 0; return 0; }
CUresult cuEventDestroy_v2(void*) { return 0; }
CUresult cuStreamBeginCapture_v2(void*, int) { capturing = true; recording = new std::vector<Recorded>; return 0; }
CUresult cuStreamEndCapture(void*, void** g) { capturing = false; *g = recording; recording = nullptr; return 0; }
CUresult cuGraphInstantiateWithFlags(void** e, void* g, unsigned long long) { *e = g; return 0; }
CUresult cuGraphLaunch(void* e, void*) {
    std::lock_guard<std::recursive_mutex> g(launch_mu);
    for (auto& r : *(std::vector<Recorded>*)e) {
        if (r.fn) { r.fn(); continue; }
        std::vector<void*> ps;
        for (auto& v : r.vals) ps.push_back(&v);
        run_launch(r.k, r.g[0], r.g[1], r.g[2], r.b[0], r.b[1], r.b[2], r.smem, ps.data());
    }
    return 0;
}
CUresult cuGraphExecDestroy(void*) { return 0; }
CUresult cuGraphDestroy(void* g) { delete (std::vector<Recorded>*)g; return 0; }

// emu_record_call appends fn to the graph being captured, as cuBLAS
// records its calls into a graph, and says whether one was (blas.cc).
bool emu_record_call(std::function<void()> fn) {
    if (!capturing) return false;
    Recorded r{};
    r.fn = std::move(fn);
    recording->push_back(r);
    return true;
}
}
