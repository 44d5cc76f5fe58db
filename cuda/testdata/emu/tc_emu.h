// Host side of kernels/tc.cuh: the same functions, computed from the PTX
// ISA's fragment layouts, for kernels built by build.py (which includes
// this file in place of tc.cuh). The warp-collective instructions (mma,
// ldmatrix) exchange operands through per-lane slots at the fiber
// emulator's warp barrier, as __shfl_sync does in cuda_emu.h: every lane
// deposits its operands and its call site, the warp meets once, every lane
// takes its result. Slots come in two sets used alternately, so a lane that
// races ahead to the next collective never overwrites operands a slower
// lane of the same warp has yet to read.
//
// What the hardware requires and a GPU would not report aborts the process
// with the kernel's name, block and thread (emu_fail):
//   - .sync.aligned: all 32 lanes of the warp live and at the same call site
//     (a lane that has returned, or waits at another instruction, or a
//     block whose last warp is partial);
//   - ldmatrix row addresses and cp.async destinations 16-byte aligned and
//     inside the block's dynamic shared memory (static __shared__ arrays
//     are host globals here and are refused);
//   - cp.async sources 16-byte aligned and inside a live device allocation
//     (cuMemAlloc'd or a mapped VMM chunk), even when src-size is 0, which
//     reads nothing; red addresses likewise (4 bytes, 8 for the v2 form);
//   - a cp.async destination reads as NaN from issue until the
//     cp.async.wait_group that retires its group, when the data lands, so a
//     read before the wait shows;
//   - ldmatrix bank conflicts: each 8-lane phase costs one wavefront per
//     distinct 16-byte row in the busiest quad of banks. R1GO_EMU_BANKS=0
//     counts nothing, 1 (the default) counts, 2 aborts at the first
//     conflicted phase.
// The counters (tc_stats) go to the file R1GO_EMU_STATS names, one line per
// launch that used any of these instructions and a total at exit
// (runtime.cc).
//
// Faithfulness limits: mma sums the exact bf16 products in double and
// rounds once (the tensor cores round differently, so compare at bf16
// tolerances); ex2.approx is computed exactly; two mma or ldmatrix calls
// on one source line count as one call site.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

typedef unsigned int u32;

// The call site of a warp-collective instruction, from the macros below.
struct EmuSite {
    const char* op;
    const char* file;
    int line;
};
#define EMU_SITE(op) (EmuSite{op, __FILE__, __LINE__})

// One lane's deposit at a warp-collective instruction.
struct EmuLane {
    EmuSite site{"", "", 0};
    unsigned seq = ~0u;         // how many collectives the thread had executed before this one
    const char* addr = nullptr; // ldmatrix: the row address this lane gives
    u32 in[6] = {};             // mma: a[0..3], b[0..1]
    u32 out[4] = {};            // ldmatrix: this lane's fragments, read once for the warp
};
// The slots of one warp for one parity of seq.
struct EmuWarpSlots {
    EmuLane lane[32];
    unsigned done = ~0u; // seq of the collective whose warp-wide part has run
};

// Counters of one launch; R1GO_EMU_STATS writes them (runtime.cc).
struct EmuTCStats {
    long long mma, ldmatrix, phases, extra_wavefronts, cp_async, cp_async_bytes, red;
};
extern EmuTCStats tc_stats;

// runtime.cc's side.
EmuWarpSlots* emu_warp_slots(unsigned seq); // the calling warp's slots of parity seq%2
unsigned emu_next_seq();                    // the calling thread's collective count, then +1
void emu_warp_sync_at(const EmuSite& s);    // warp barrier, remembering where (for messages)
int emu_warp_size();                        // lanes of the calling warp (the block's last warp may be partial)
const char* emu_lane_state(int lane);       // what a lane of the calling warp waits at, for messages
char* emu_smem_base();
long long emu_smem_size();
bool emu_in_global(const void* p, size_t n);
void emu_cp_async(void* dst, const void* src, int src_bytes);
void emu_cp_commit();
void emu_cp_wait(int n);
int emu_bank_mode();

inline bool emu_in_smem(const void* p, long long n) {
    long long off = (const char*)p - emu_smem_base();
    return off >= 0 && off + n <= emu_smem_size();
}
inline long long emu_smem_offset(const void* p) { return (const char*)p - emu_smem_base(); }
inline int emu_lane_id() { return (int)((threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31); }

inline bool emu_same_site(const EmuSite& a, const EmuSite& b) {
    return a.line == b.line && (a.op == b.op || !strcmp(a.op, b.op)) && (a.file == b.file || !strcmp(a.file, b.file));
}

// emu_collective deposits the site, meets the warp and checks that all 32
// lanes are live and at this very call; it returns the warp's slots, in
// which the caller stored its operands beforehand (through *mine).
inline EmuWarpSlots* emu_collective_begin(const EmuSite& s, EmuLane** mine, unsigned* seq) {
    *seq = emu_next_seq();
    EmuWarpSlots* w = emu_warp_slots(*seq);
    *mine = &w->lane[emu_lane_id()];
    (*mine)->site = s;
    (*mine)->seq = *seq;
    return w;
}
inline void emu_collective_meet(EmuWarpSlots* w, const EmuSite& s, unsigned seq) {
    emu_warp_sync_at(s);
    // A lane whose deposit is this call's was here, even if it has run on
    // since (and exited); any other lane was not.
    int me = emu_lane_id(), size = emu_warp_size();
    for (int l = 0; l < 32; l++) {
        const EmuLane& o = w->lane[l];
        if (l < size && o.seq == seq && emu_same_site(o.site, s)) continue;
        if (l >= size || !strcmp(emu_lane_state(l), "has exited"))
            emu_fail("%s at %s:%d needs all 32 lanes of the warp (.sync.aligned), but lane %d %s", s.op, s.file, s.line, l,
                     emu_lane_state(l));
        emu_fail("divergent warp: lane %d is at %s (%s:%d), its warp-collective instruction #%u, but lane %d %s (.sync.aligned needs "
                 "every lane at the same instruction)",
                 me, s.op, s.file, s.line, seq, l, emu_lane_state(l));
    }
}

inline float emu_bf16_float(u32 r, int hi) {
    u32 u = hi ? (r & 0xffff0000u) : (r << 16);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32. With g = lane/4 and
// t = lane%4, lane (g, t) holds A(g, 2t..2t+1) in a[0], A(g+8, ..) in
// a[1], A(g, 2t+8..) in a[2], A(g+8, 2t+8..) in a[3]; B(2t..2t+1, g) in
// b[0], B(2t+8.., g) in b[1]; D(g, 2t..2t+1) in d[0..1], D(g+8, ..) in
// d[2..3]; the lower column or k in the low half. So A(r, k) lives in lane
// (r%8)·4 + (k%8)/2, register (r ≥ 8) + 2(k ≥ 8), and B(k, n) in lane
// n·4 + (k%8)/2, register k ≥ 8.
inline void emu_mma_bf16(const EmuSite& s, float d[4], const u32 a[4], const u32 b[2]) {
    EmuLane* me;
    unsigned seq;
    EmuWarpSlots* w = emu_collective_begin(s, &me, &seq);
    for (int i = 0; i < 4; i++) me->in[i] = a[i];
    me->in[4] = b[0];
    me->in[5] = b[1];
    emu_collective_meet(w, s, seq);
    if (w->done != seq) {
        w->done = seq;
        tc_stats.mma++;
    }
    int lane = emu_lane_id(), g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; i++) {
        int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i & 1);
        double acc = 0;
        for (int k = 0; k < 16; k++) {
            const EmuLane& la = w->lane[(row & 7) * 4 + ((k & 7) >> 1)];
            const EmuLane& lb = w->lane[col * 4 + ((k & 7) >> 1)];
            acc += (double)emu_bf16_float(la.in[(row >= 8) + 2 * (k >= 8)], k & 1) * emu_bf16_float(lb.in[4 + (k >= 8)], k & 1);
        }
        d[i] = (float)((double)d[i] + acc); // bf16 products are exact in double
    }
}
#define tc_mma_bf16(...) emu_mma_bf16(EMU_SITE("tc_mma_bf16"), __VA_ARGS__)

// emu_phase_wavefronts: one ldmatrix phase reads 8 rows of 16 bytes; a row
// at shared offset o covers banks 4q..4q+3 with q = (o/16) mod 8. Distinct
// rows in one quad serialise, the same row is broadcast.
inline int emu_phase_wavefronts(const char* const* rows) {
    int worst = 1;
    for (int q = 0; q < 8; q++) {
        const char* seen[8];
        int n = 0;
        for (int r = 0; r < 8; r++) {
            if ((emu_smem_offset(rows[r]) >> 4 & 7) != q) continue;
            bool dup = false;
            for (int i = 0; i < n; i++) dup |= seen[i] == rows[r];
            if (!dup) seen[n++] = rows[r];
        }
        worst = n > worst ? n : worst;
    }
    return worst;
}

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lane l gives the
// address of row l%8 of matrix l/8 (lanes past 8·nmat are ignored); in
// r[j] lane l receives row l/4, bytes 4(l%4)..+3 of matrix j, or with
// .trans the elements (2(l%4), l/4) and (2(l%4)+1, l/4). The first lane of
// the warp to run reads every row for the warp, as the one instruction
// does, so a store a lane makes right after cannot leak into another
// lane's fragment.
template <int NMAT, bool TRANS> inline void emu_ldmatrix(const EmuSite& s, u32* r, const void* p) {
    EmuLane* me;
    unsigned seq;
    EmuWarpSlots* w = emu_collective_begin(s, &me, &seq);
    int lane = emu_lane_id();
    me->addr = (const char*)p;
    if (lane < 8 * NMAT) {
        if (!emu_in_smem(p, 16))
            emu_fail("%s at %s:%d: row address %p is outside the block's %lld bytes of dynamic shared memory", s.op, s.file, s.line, p,
                     emu_smem_size());
        if (emu_smem_offset(p) & 15)
            emu_fail("%s at %s:%d: row address at shared offset %lld is not 16-byte aligned", s.op, s.file, s.line, emu_smem_offset(p));
    }
    emu_collective_meet(w, s, seq);
    if (w->done != seq) {
        w->done = seq;
        tc_stats.ldmatrix++;
        if (int mode = emu_bank_mode(); mode > 0) {
            for (int j = 0; j < NMAT; j++) {
                const char* rows[8];
                for (int i = 0; i < 8; i++) rows[i] = w->lane[8 * j + i].addr;
                int wf = emu_phase_wavefronts(rows);
                tc_stats.phases++;
                tc_stats.extra_wavefronts += wf - 1;
                if (wf > 1 && mode > 1)
                    emu_fail("%s at %s:%d: bank conflict, matrix %d's rows take %d wavefronts (R1GO_EMU_BANKS=2)", s.op, s.file, s.line, j, wf);
            }
        }
        for (int l = 0; l < 32; l++) {
            for (int j = 0; j < NMAT; j++) {
                u32 v;
                if (!TRANS) {
                    memcpy(&v, w->lane[8 * j + l / 4].addr + 4 * (l % 4), 4);
                } else {
                    unsigned short lo, hi;
                    memcpy(&lo, w->lane[8 * j + 2 * (l % 4)].addr + 2 * (l / 4), 2);
                    memcpy(&hi, w->lane[8 * j + 2 * (l % 4) + 1].addr + 2 * (l / 4), 2);
                    v = (u32)lo | (u32)hi << 16;
                }
                w->lane[l].out[j] = v;
            }
        }
    }
    for (int j = 0; j < NMAT; j++) r[j] = me->out[j];
}
#define tc_ldmatrix_x4(...) emu_ldmatrix<4, false>(EMU_SITE("tc_ldmatrix_x4"), __VA_ARGS__)
#define tc_ldmatrix_x4_trans(...) emu_ldmatrix<4, true>(EMU_SITE("tc_ldmatrix_x4_trans"), __VA_ARGS__)
#define tc_ldmatrix_x2(...) emu_ldmatrix<2, false>(EMU_SITE("tc_ldmatrix_x2"), __VA_ARGS__)
#define tc_ldmatrix_x2_trans(...) emu_ldmatrix<2, true>(EMU_SITE("tc_ldmatrix_x2_trans"), __VA_ARGS__)

inline u32 tc_smem(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// cp.async.cg.shared.global [dst], [src], 16, src_bytes: per thread; the
// bytes land at the wait that retires the copy's group (runtime.cc).
inline void tc_cp_async16(void* dst, const void* src, int src_bytes) {
    if (!emu_in_smem(dst, 16))
        emu_fail("tc_cp_async16: destination %p is outside the block's %lld bytes of dynamic shared memory", dst, emu_smem_size());
    if (emu_smem_offset(dst) & 15) emu_fail("tc_cp_async16: destination at shared offset %lld is not 16-byte aligned", emu_smem_offset(dst));
    if (src_bytes < 0 || src_bytes > 16) emu_fail("tc_cp_async16: src-size %d is outside [0, 16]", src_bytes);
    if ((uintptr_t)src & 15) emu_fail("tc_cp_async16: source %p is not 16-byte aligned", src);
    if (!emu_in_global(src, src_bytes > 0 ? src_bytes : 1))
        emu_fail("tc_cp_async16: source %p (src-size %d) is outside every live device allocation", src, src_bytes);
    tc_stats.cp_async++;
    tc_stats.cp_async_bytes += 16;
    emu_cp_async(dst, src, src_bytes);
}
inline void tc_cp_commit() { emu_cp_commit(); }
template <int N> inline void tc_cp_wait() {
    static_assert(N >= 0, "cp.async.wait_group takes a count of groups");
    emu_cp_wait(N);
}

// cvt.rn.bf16x2.f32: each float to bf16, to nearest even (overflow to
// infinity falls out of the carry); a NaN becomes the canonical 0x7fff.
inline u32 emu_bf16_rn(float f) {
    u32 u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
inline u32 tc_pack_bf16x2(float lo, float hi) { return emu_bf16_rn(lo) | emu_bf16_rn(hi) << 16; }

// ex2.approx.ftz.f32: subnormal inputs count as zero, subnormal results
// flush to zero.
inline float tc_exp2(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    float y = std::exp2(x);
    return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

inline void emu_red_check(const char* op, const float* p, int bytes) {
    if ((uintptr_t)p % bytes) emu_fail("%s: address %p is not %d-byte aligned", op, (const void*)p, bytes);
    if (!emu_in_global(p, bytes)) emu_fail("%s: address %p is outside every live device allocation", op, (const void*)p);
}
inline void tc_red_add(float* p, float v) {
    emu_red_check("tc_red_add", p, 4);
    tc_stats.red++;
    atomicAdd(p, v);
}
// The emulated device is an sm_90, so the vector form's alignment applies.
inline void tc_red_add2(float* p, float a, float b) {
    emu_red_check("tc_red_add2", p, 8);
    tc_stats.red++;
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
}
