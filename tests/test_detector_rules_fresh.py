"""One rule at a time, for the rules written on the misses of the fresh strong-model corpus's first reading
(tests/detector_corpus_fresh/, docs/features.md): a kernel written for the test that the rule must find and a
near miss it must not. Build rules read a build's opcode counts and dataflow facts given here as a recorded
build would give them (the corpus's own recorded builds are scored in tests/test_detector_fresh.py)."""

from __future__ import annotations

from cuda_llm.results import SassSummary
from test_detector_rules import found


def _build(ops: dict[str, int], flow: dict[str, int] | None = None):
    """(kernels, SASS summary) of a recorded build with these full opcodes and dataflow facts."""
    opcodes: dict[str, int] = {}
    for op, n in ops.items():
        opcodes[op.split(".", 1)[0]] = opcodes.get(op.split(".", 1)[0], 0) + n
    return (), SassSummary(opcodes=opcodes, ops=ops, flow=flow or {})


HINTED_READ = """
__global__ void count(const unsigned char* __restrict__ data, unsigned* __restrict__ hist, int n) {
    const uint4* d4 = reinterpret_cast<const uint4*>(data);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n / 16) { uint4 v = __ldcs(d4 + i); atomicAdd(hist + (v.x & 255), 1u); }
    if (i < n % 16) atomicAdd(hist + data[n - 1 - i], 1u);
}
"""


def test_a_const_restrict_pointer_read_with_cache_operators_is_read_only():
    assert found("readonly_cache", HINTED_READ, _build({"LDG.E.EF.128": 1, "LDG.E.U8": 1, "EXIT": 1}))
    # plain loads alone: the pointer may have been written through an alias after all
    assert not found("readonly_cache", HINTED_READ, _build({"LDG.E.128": 1, "LDG.E.U8": 1, "EXIT": 1}))


GROUPED = """
__device__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int group_size = 8 * tiles_n;
    const int group = tile / group_size;
    const int first_m = group * 8;
    const int rows = min(tiles_m - first_m, 8);
    const int in_group = tile - group * group_size;
    tm = first_m + in_group % rows;
    tn = in_group / rows;
}
__global__ void gemm(float* c, int tiles_m, int tiles_n) {
    int tm, tn;
    tile_coords(blockIdx.x, tiles_m, tiles_n, tm, tn);
    c[tm * tiles_n + tn] = 1.f;
}
"""
TAIL_ONLY = """
__global__ void copy(const float* a, float* b, int n) {
    const int start = blockIdx.x * 256;
    const int cnt = min(n - start, 256);
    if (threadIdx.x < cnt) b[start + threadIdx.x] = a[start + threadIdx.x];
}
"""


def test_a_grouped_order_with_a_clipped_band_is_rasterization():
    assert found("block_rasterization", GROUPED)
    assert not found("block_rasterization", TAIL_ONLY)


MBAR_RING = """
__device__ void mbar_wait(unsigned bar, unsigned phase) {
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }"
                 :: "r"(bar), "r"(phase));
}
__device__ void mbar_arrive(unsigned bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar)); }
__global__ void ring(float* out, int k_tiles) {
    extern __shared__ char smem[];
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned full_bar = base + 4 * 16384, empty_bar = full_bar + 4 * 8;
    int stage = 0, phase = 0;
    for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(full_bar + 8 * stage, phase);
        out[threadIdx.x] += smem[stage * 16384 + threadIdx.x];
        mbar_arrive(empty_bar + 8 * stage);
        if (++stage == 4) { stage = 0; phase ^= 1; }
    }
}
"""


def test_a_full_empty_mbarrier_ring_through_wrappers_is_double_buffering():
    assert found("double_buffering", MBAR_RING)
    # one barrier per copy, waited right after it is issued: no stage is released for the producer to refill
    assert not found("double_buffering", MBAR_RING.replace("mbar_arrive(empty_bar + 8 * stage);", ""))


WARP_LOOKBACK = """
__global__ void lookback(const unsigned long long* status, unsigned* out, int tile) {
    const int lane = threadIdx.x & 31;
    unsigned excl = 0;
    int base = tile - 1;
    while (true) {
        const int p = base - lane;
        unsigned long long w = p >= 0 ? *(volatile const unsigned long long*)(status + p) : (2ull << 32);
        const unsigned inc = __ballot_sync(0xffffffffu, (w >> 32) == 2);
        excl += (unsigned)w;
        if (inc) break;
        base -= 32;
    }
    out[tile] = excl;
}
"""


def test_a_warp_parallel_look_back_window_is_a_look_back_scan():
    assert found("decoupled_lookback_scan", WARP_LOOKBACK)
    # a window read once, never stepped back: a neighbour exchange, not a look-back
    assert not found("decoupled_lookback_scan", WARP_LOOKBACK.replace("base -= 32;", "break;"))


PERSISTENT_BEFORE = """
__global__ void tiles(float* out, int ntiles) {
    int tile = blockIdx.x;
    for (int it = 0; tile < ntiles; ++it, tile += gridDim.x) out[tile * 256 + threadIdx.x] = it;
}
"""


def test_a_tile_loop_whose_counter_starts_before_it_is_persistent():
    assert found("persistent_kernel", PERSISTENT_BEFORE)
    assert not found("persistent_kernel", PERSISTENT_BEFORE.replace("tile += gridDim.x", "tile += 1"))


SLICED = """
__global__ void gemv_t(const float* A, const float* x, float* partial, int M, int N, int rows_per_split) {
    const int r0 = blockIdx.y * rows_per_split;
    const int r1 = min(M, r0 + rows_per_split);
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.f;
    for (int r = r0; r < r1; ++r) acc += A[(size_t)r * N + col] * x[r];
    partial[(size_t)blockIdx.y * N + col] = acc;
}
"""


def test_a_slice_written_to_its_partials_is_split_k():
    assert found("split_k", SLICED)
    # the y block index picks an output row band, stored to the output itself
    assert not found("split_k", SLICED.replace("partial", "out"))


UPFRONT = """
__global__ void digit_hists(const unsigned* keys, unsigned* ghist, int n) {
    __shared__ unsigned h[4][256];
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) (&h[0][0])[i] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const unsigned k = keys[i];
        for (int p = 0; p < 4; ++p) atomicAdd(&h[p][(k >> (p * 8)) & 255], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 1024; i += blockDim.x) atomicAdd(ghist + i, (&h[0][0])[i]);
}
"""


def test_the_upfront_histogram_of_every_pass_is_radix_sort():
    assert found("radix_sort", UPFRONT)
    # one byte histogram per channel: the shift is fixed, no pass chooses it
    assert not found("radix_sort", UPFRONT.replace("(p * 8)", "8"))


HELPER_ACC = """
__device__ __forceinline__ float dot4(float4 a, float4 x, float acc) {
    acc = fmaf(a.x, x.x, acc); acc = fmaf(a.y, x.y, acc);
    acc = fmaf(a.z, x.z, acc); acc = fmaf(a.w, x.w, acc);
    return acc;
}
__global__ void gemv2(const float4* A, const float4* x, float* y, int n4) {
    const int row0 = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    float acc[2];
    for (int r = 0; r < 2; ++r) acc[r] = 0.f;
    for (int c = 0; c < n4; ++c) {
        const float4 xv = x[c];
        for (int r = 0; r < 2; ++r) acc[r] = dot4(A[(row0 + r) * n4 + c], xv, acc[r]);
    }
    for (int r = 0; r < 2; ++r) y[row0 + r] = acc[r];
}
"""


def test_accumulators_fed_a_shared_operand_through_a_helper_are_register_blocking():
    assert found("register_blocking", HELPER_ACC)
    # every operand indexed by the row: independent dot products, nothing loaded once feeds two
    assert not found("register_blocking", HELPER_ACC.replace("const float4 xv = x[c];", "")
                     .replace("xv, acc[r]", "x[r * n4 + c], acc[r]"))


HELD_ROW = """
__global__ void normalize(const float* x, float* y) {
    float v[4];
    const float* row = x + blockIdx.x * 128;
    for (int i = 0; i < 4; ++i) v[i] = row[threadIdx.x + 32 * i];
    float s = 0.f;
    for (int i = 0; i < 4; ++i) s += v[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    for (int i = 0; i < 4; ++i) y[blockIdx.x * 128 + threadIdx.x + 32 * i] = v[i] / s;
}
"""


def test_a_held_row_needs_the_builds_fusion_where_there_is_a_build():
    assert found("single_pass_row", HELD_ROW)                                             # source alone
    assert found("single_pass_row", HELD_ROW, _build({"EXIT": 1}, {"fused": 1}))
    # the build sees no statistic in any stored value: the spelling matched something else
    assert not found("single_pass_row", HELD_ROW, _build({"EXIT": 1}, {"fused": 0}))


ROTATED = """
__global__ void fold(unsigned* hist) {
    __shared__ unsigned h[256 * 32];
    h[threadIdx.x] = threadIdx.x;
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
        unsigned s = 0;
        for (int j = 0; j < 32; ++j) s += h[b * 32 + ((j + b) & 31)];
        hist[b] = s;
    }
}
"""
PADDED_POINTER = """
constexpr int BM = 128;
constexpr int kPad = 8;
constexpr int kLd = BM + kPad;
__global__ void tile(const float* a, float* out) {
    extern __shared__ float smem[];
    float* As = smem + 0;
    for (int r = 0; r < 8; ++r) As[r * kLd + threadIdx.x] = a[r * BM + threadIdx.x];
    __syncthreads();
    const float* Ak = As + threadIdx.x * kLd;
    out[threadIdx.x] = Ak[0] + Ak[1];
}
"""


def test_a_rotated_column_and_a_named_padded_pitch_are_bank_conflict_layouts():
    assert found("bank_conflict_padding", ROTATED)
    assert not found("bank_conflict_padding", ROTATED.replace("((j + b) & 31)", "((j + 1) & 31)"))
    assert found("bank_conflict_padding", PADDED_POINTER)
    # the padded pitch used for a global array only
    assert not found("bank_conflict_padding", PADDED_POINTER.replace("const float* Ak = As + threadIdx.x * kLd;",
                                                                    "const float* Ak = a + threadIdx.x * kLd;"))
