"""Rules of the tiling and memory features (tiling, pipelining, padding, register blocking, coalescing,
async copies, precision, vector and read-only loads, tensor cores), each with a kernel written for the test
that it must find and a near miss it must not (see tests/test_detector_rules.py)."""

from __future__ import annotations

from cuda_llm.feature_db import detect_features, load_catalogue
from cuda_llm.feature_db.source_views import canonical, drop_unused_macros
from cuda_llm.feature_db.template_args import instantiate_templates

CATALOGUE = {f.id: f for f in load_catalogue()}


def found(feature: str, source: str, build=None) -> bool:
    kernels, sass = build if build is not None else ((), None)
    return feature in detect_features(source, kernels, [CATALOGUE[feature]], sass=sass)


# ---------------------------------------------------------------------------------------- unused macros
MACROS = """#define HALF2(v) (reinterpret_cast<half2 *>(&(v))[0])
#define FLOAT4(v) (reinterpret_cast<float4 *>(&(v))[0])
#define BULK_COMMIT() asm volatile("cp.async.bulk.commit_group;\\n" ::)
#define LOAD4(v) FLOAT4(v)
__global__ void add(float* a, float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def test_a_macro_no_code_uses_counts_for_nothing():
    for feature in ("reduced_precision", "vector_loads", "tma_bulk_copy"):
        assert not found(feature, MACROS), feature
    used = MACROS.replace("c[i] = a[i] + b[i];", "LOAD4(c[4 * i]) = LOAD4(a[4 * i]);")
    assert found("vector_loads", used)              # used through another macro: it counts
    assert not found("reduced_precision", used)
    calls = MACROS.replace("c[i] = a[i] + b[i];", "{ c[i] = a[i]; BULK_COMMIT(); }")
    assert found("tma_bulk_copy", calls)


def test_unused_macros_are_blanked_in_place_and_flags_kept():
    text = "#define FLAG\n#define USED 4\n#define UNUSED(x) (x * 2)\nint a = USED;\n"
    out = drop_unused_macros(text)
    assert len(out) == len(text) and "UNUSED" not in out and "#define USED 4" in out and "#define FLAG" in out


# ---------------------------------------------------------------------------------------- readonly_cache
def test_a_const_restrict_pointer_is_read_only_and_one_written_in_place_is_not():
    reads = """__global__ void scale(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.f * x[i];
}"""
    assert found("readonly_cache", reads)
    assert found("readonly_cache", reads.replace("const float* __restrict__ x", "float const* __restrict x"))
    in_place = """__global__ void scale(float* __restrict__ x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 2.f * x[i];
}"""
    assert not found("readonly_cache", in_place)


# ---------------------------------------------------------------------------------------- double_buffering
PARITY_RING = """#define BK 16
__global__ void mm(const float* A, const float* B, float* C, int K) {
    __shared__ float s_a[2][BK][64];
    float acc = 0.f;
    s_a[0][threadIdx.y][threadIdx.x] = A[threadIdx.y * K + threadIdx.x];
    __syncthreads();
    for (int k = 1; k < K / BK; ++k) {
        int cur = (k - 1) & 1;
        int nxt = k & 1;
        s_a[nxt][threadIdx.y][threadIdx.x] = A[threadIdx.y * K + k * BK + threadIdx.x];
        for (int t = 0; t < BK; ++t) acc += s_a[cur][t][threadIdx.x] * B[t];
        __syncthreads();
    }
    C[threadIdx.x] = acc;
}"""


def test_the_two_parities_of_the_tile_counter_as_stages_are_double_buffering():
    assert found("double_buffering", PARITY_RING)
    # one parity only: the stage written is the stage read, after a barrier (no copy in flight)
    one_stage = PARITY_RING.replace("int cur = (k - 1) & 1;", "int cur = k & 1;")
    assert not found("double_buffering", one_stage)


SPLIT_HALVES = """__global__ void mm(const float* A, float* C, int K) {
    __shared__ float tile[2][16][64];
    int half = threadIdx.x / 128;
    float acc = 0.f;
    for (int k = 0; k < K; k += 32) {
        if (half == 0) {
            tile[half][threadIdx.x % 16][threadIdx.x % 64] = A[k + threadIdx.x];
            __syncthreads();
            for (int t = 0; t < 16; ++t) acc += tile[half][t][threadIdx.x % 64];
        } else {
            for (int t = 0; t < 16; ++t) acc += tile[half - 1][t][threadIdx.x % 64];
            __syncthreads();
            tile[half][threadIdx.x % 16][threadIdx.x % 64] = A[k + 16 + threadIdx.x];
        }
        __syncthreads();
    }
    C[threadIdx.x] = acc;
}"""


def test_a_split_block_reading_the_stage_beside_its_own_is_double_buffering():
    assert found("double_buffering", SPLIT_HALVES)
    # two quantities side by side in a [2][..][..] array, each half on its own: no stage beside another
    own = SPLIT_HALVES.replace("tile[half - 1]", "tile[half]")
    assert not found("double_buffering", own)


# ---------------------------------------------------------------------------------------- bank_conflict_padding
PADDED_TEMPLATE = """template <int BM = 64, int BK = 16, int OFFSET = 0>
__global__ void mm(const float* A, float* C, int K) {
    __shared__ float s_a[BK][BM + OFFSET];
    s_a[threadIdx.y][threadIdx.x] = A[threadIdx.y * K + threadIdx.x];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < BK; ++k) acc += s_a[k][threadIdx.x];
    C[threadIdx.x] = acc;
}
template __global__ void mm<64, 16, 8>(const float*, float*, int);
"""


def test_a_padding_template_parameter_pads_only_where_the_file_instantiates_it_non_zero():
    assert instantiate_templates(PADDED_TEMPLATE).count("[16][64 + 8]") == 1
    assert found("bank_conflict_padding", PADDED_TEMPLATE)
    default = PADDED_TEMPLATE.replace("mm<64, 16, 8>", "mm<64, 16>")
    assert not found("bank_conflict_padding", default)        # OFFSET keeps its default 0
    launched = PADDED_TEMPLATE.replace("template __global__ void mm<64, 16, 8>(const float*, float*, int);",
                                       "void run(const float* a, float* c) { mm<64, 16, 4><<<1, 64>>>(a, c, 16); }")
    assert found("bank_conflict_padding", launched)
    two = launched + "void run2(const float* a, float* c) { mm<64, 16, 0><<<1, 64>>>(a, c, 16); }"
    assert instantiate_templates(two) == two                      # two instantiations: nothing is fixed


def test_the_stage_beside_a_split_blocks_own_is_no_halo():
    staged = """__global__ void mm(const float* A, float* C, int K) {
    __shared__ float tile[2][16][64 + 8];
    int p = threadIdx.x / 128;
    tile[p][threadIdx.x % 16][threadIdx.x % 64] = A[threadIdx.x];
    __syncthreads();
    float* other = &tile[p - 1][0][0];
    C[threadIdx.x] = other[threadIdx.x % 64];
}"""
    assert found("bank_conflict_padding", staged)
    halo = """__global__ void st(const float* x, float* y) {
    __shared__ float s[256 + 2];
    s[threadIdx.x + 1] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * 256 + threadIdx.x] = s[threadIdx.x - 1] + s[threadIdx.x + 1];
}"""
    assert not found("bank_conflict_padding", halo)


SWIZZLE_HELPER = """__device__ __forceinline__ int swz(int i, int j) { return ((j >> 3) ^ (i >> 2)) << 3; }
__global__ void k(const float* x, float* y) {
    __shared__ float s[64][64];
    int r = threadIdx.x / 8, c = (threadIdx.x % 8) * 8;
    s[r][swz(r, c)] = x[threadIdx.x];
    __syncthreads();
    y[threadIdx.x] = s[c][swz(c, r)];
}"""


def test_a_swizzle_computed_in_a_helper_is_a_conflict_free_layout_and_a_bitonic_partner_is_not():
    assert found("bank_conflict_padding", SWIZZLE_HELPER)
    bitonic = """__global__ void sort(float* x) {
    __shared__ float s[256];
    s[threadIdx.x] = x[threadIdx.x];
    for (int k = 2; k <= 256; k <<= 1)
        for (int j = k >> 1; j > 0; j >>= 1) {
            __syncthreads();
            int ixj = threadIdx.x ^ j;
            if (ixj > threadIdx.x && s[threadIdx.x] > s[ixj]) { float t = s[ixj]; s[ixj] = s[threadIdx.x]; s[threadIdx.x] = t; }
        }
    x[threadIdx.x] = s[threadIdx.x];
}"""
    assert not found("bank_conflict_padding", bitonic)


# ---------------------------------------------------------------------------------------- smem_tiling
OWN_SLOTS = """__global__ void norm(float* x, int n) {
    __shared__ float row[4096];
    int tid = threadIdx.x, step = blockDim.x;
    for (int t = tid; t < n; t += step) row[t] = x[blockIdx.x * n + t];
    __syncthreads();
    float m = row[tid];
    for (int i = tid + step; i < n; i += step) m = fmaxf(m, row[i] * row[i]);
    for (int t = tid; t < n; t += step) x[blockIdx.x * n + t] = row[t] / m;
}"""


def test_a_row_read_back_in_the_slots_each_thread_filled_is_no_tile_and_one_read_per_warp_is():
    assert not found("smem_tiling", OWN_SLOTS)
    per_warp = """__global__ void gemv(const float* W, const float* x, float* y, int n) {
    __shared__ float xs[4096];
    for (int t = threadIdx.x; t < n; t += blockDim.x) xs[t] = x[t];
    __syncthreads();
    int lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    float acc = 0.f;
    for (int c = lane; c < n; c += 32) acc += W[row * n + c] + xs[c];
    y[row] = acc;
}"""
    assert found("smem_tiling", per_warp)


def test_a_scratch_updated_in_place_before_its_neighbour_is_read_is_no_halo():
    stencil = """__global__ void st(const float* x, float* y) {
    __shared__ float s[258];
    s[threadIdx.x + 1] = x[blockIdx.x * 256 + threadIdx.x];
    __syncthreads();
    y[blockIdx.x * 256 + threadIdx.x] = s[threadIdx.x + 2] - s[threadIdx.x];
}"""
    assert found("smem_tiling", stencil)
    scan = stencil.replace("__syncthreads();", "__syncthreads(); s[threadIdx.x + 1] += s[threadIdx.x]; __syncthreads();")
    assert not found("smem_tiling", scan)


def test_a_tile_stored_at_x_y_and_read_at_y_x_is_a_transpose_tile():
    src = """__global__ void tr(const int* a, int* b, int n) {
    __shared__ int t[32][32];
    int lx = threadIdx.x, ly = threadIdx.y;
    t[lx][ly] = a[(blockIdx.y * 32 + ly) * n + blockIdx.x * 32 + lx];
    __syncthreads();
    b[(blockIdx.x * 32 + ly) * n + blockIdx.y * 32 + lx] = t[ly][lx];
}"""
    assert found("smem_tiling", src)
    assert not found("smem_tiling", src.replace("= t[ly][lx];", "= t[lx][ly];"))   # its own element back


HELPER_FILLED = """template <int T>
__device__ void load_tiles(const float* A, float As[T][T], size_t k0, size_t tid, int n) {
    for (size_t i{0U}; i < T * T / 256; ++i) {
        size_t const r{(tid + i * 256) / T};
        size_t const c{(tid + i * 256) % T};
        As[r][c] = A[r * n + k0 + c];
    }
}
template <int T>
__global__ void mm(const float* A, const float* B, float* C, int n) {
    __shared__ float As[T][T];
    float sum{0.f};
    for (size_t kt{0U}; kt < n / T; ++kt) {
        load_tiles<T>(A, As, kt * T, threadIdx.y * blockDim.x + threadIdx.x, n);
        __syncthreads();
        for (size_t k_i{0U}; k_i < T; ++k_i)
            sum += As[threadIdx.y][k_i] * B[(kt * T + k_i) * n + threadIdx.x];
        __syncthreads();
    }
    C[threadIdx.y * n + threadIdx.x] = sum;
}
template __global__ void mm<32>(const float*, const float*, float*, int);
"""


def test_brace_initialized_scalars_read_as_assignments():
    out = canonical("for (size_t k{0U}; k < 4; ++k) { size_t const r{threadIdx.x + 1}; T v{x}; }")
    assert "for (int k = 0U;" in out and "size_t const r = threadIdx.x + 1;" in out and "T v{x}" in out


def test_a_tile_filled_by_a_helper_given_the_whole_array_and_read_in_a_loop_over_it_is_tiling():
    assert found("smem_tiling", HELPER_FILLED)
    # read only at the thread's own element: a staging copy, not a tile
    own = HELPER_FILLED.replace("sum += As[threadIdx.y][k_i] * B[(kt * T + k_i) * n + threadIdx.x];",
                                "sum += As[threadIdx.y][threadIdx.x] * B[(kt * T + k_i) * n + threadIdx.x];")
    assert not found("smem_tiling", own)


def test_a_tile_row_at_the_loop_index_handed_to_a_register_loader_is_tiling():
    src = """template <int K, int N>
__device__ void to_regs(const float row[N], float regs[8], int col) {
    for (int j = 0; j < 8; ++j) regs[j] = row[col * 8 + j];
}
template <int K, int N>
__device__ void step(const float Bs[K][N], float regs[8], float acc[8], float a, int col) {
    for (int k_i = 0; k_i < K; ++k_i) {
        to_regs<K, N>(Bs[k_i], regs, col);
        for (int j = 0; j < 8; ++j) acc[j] += a * regs[j];
    }
}
__global__ void mm(const float* B, float* C) {
    __shared__ float Bs[8][128];
    float regs[8], acc[8] = {0.f};
    Bs[threadIdx.x / 128][threadIdx.x % 128] = B[threadIdx.x];
    __syncthreads();
    step<8, 128>(Bs, regs, acc, 1.f, threadIdx.x % 16);
    C[threadIdx.x] = acc[0];
}"""
    assert found("smem_tiling", src)
    assert not found("smem_tiling", src.replace("to_regs<K, N>(Bs[k_i], regs, col);", "to_regs<K, N>(Bs[0], regs, col);"))


# ---------------------------------------------------------------------------------------- register_blocking
TEMPLATE_ACC = """template <typename T, int R, int TM, int TN>
__device__ void outer(T const a[R][TM], T const b[R][TN], T acc[R][R][TM][TN]) {
    for (int r = 0; r < R; ++r)
        for (int s = 0; s < R; ++s)
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j)
                    acc[r][s][i][j] += a[r][i] * b[s][j];
}
template <typename T>
__global__ void mm(const T* A, const T* B, T* C) {
    T a[2][4], b[2][4];
    T acc[2][2][4][4] = {static_cast<T>(0)};
    for (int r = 0; r < 2; ++r) for (int i = 0; i < 4; ++i) { a[r][i] = A[r * 4 + i]; b[r][i] = B[r * 4 + i]; }
    outer<T, 2, 4, 4>(a, b, acc);
    C[threadIdx.x] = acc[0][0][0][0];
}
template __global__ void mm<float>(const float*, const float*, float*);
"""


def test_a_four_dimensional_accumulator_of_a_template_type_in_a_helper_is_register_blocking():
    assert found("register_blocking", TEMPLATE_ACC)
    # the helper copies instead of multiplying: no products accumulated
    assert not found("register_blocking", TEMPLATE_ACC.replace("+= a[r][i] * b[s][j];", "= a[r][i];"))


# ---------------------------------------------------------------------------------------- coalesced_access
def test_a_half_warp_lane_is_the_thread_index_for_16_byte_chunks():
    src = """__global__ void cp(const int4* __restrict__ B, int4* out, int N) {
    int tid = threadIdx.y * blockDim.x + threadIdx.x;
    int row = tid / 16;
    int chunk = tid % 16;
    int addr = (blockIdx.y * 16 + row) * N + blockIdx.x * 16 + chunk;
    out[addr] = B[addr];
}"""
    assert "blockIdx.x * 16 + threadIdx.x" in canonical(src)
    assert found("coalesced_access", src)
    assert not found("coalesced_access", src.replace("+ chunk;", "+ chunk * N;"))   # a chunk per row: strided


def test_a_transpose_that_stores_at_the_column_taken_apart_times_a_stride_is_not_coalesced():
    src = """__global__ void tr(const float* x, float* y, const int rows, const int cols) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = idx / cols;
    const int c = idx % cols;
    if (idx < rows * cols) y[c * rows + r] = x[idx];
}"""
    assert not found("coalesced_access", src)
    assert found("coalesced_access", src.replace("y[c * rows + r]", "y[r * cols + c]"))


def test_a_vector_cast_of_a_global_pointer_subscripted_by_the_lane_is_coalesced():
    src = """__global__ void gemv(float* __restrict__ A, float* __restrict__ x, float* y, int N) {
    int lane = threadIdx.x % 32;
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    float s = 0.f;
    for (int i = 0; i < N / 128; i++) {
        int c = i * 32 + lane;
        float4 a = reinterpret_cast<float4 *>(A + row * N)[c];
        float4 b = ((float4 *)x)[c];
        s += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
    if (lane == 0) y[row] = s;
}"""
    assert found("coalesced_access", src)
    assert found("coalesced_access", src.replace("((float4 *)x)[c]", "x[0]"))
    strided = src.replace("int c = i * 32 + lane;", "int c = lane * (N / 128) + i;")   # a run per lane
    assert not found("coalesced_access", strided)


COOPERATIVE_LOAD = """template <int W, int NT>
__device__ void load(const float* A, float* tile, size_t tid, int lda) {
    for (size_t i{0U}; i < W * W / NT; ++i) {
        size_t const r{(tid + i * NT) / W};
        size_t const c{(tid + i * NT) % W};
        tile[r * W + c] = A[r * lda + c];
    }
}
__global__ void k(const float* A, float* out, int lda) {
    __shared__ float tile[64 * 64];
    size_t const t{threadIdx.y * blockDim.x + threadIdx.x};
    int half = t / 128;
    load<64, 128>(A, tile, t - half * 128, lda);
    __syncthreads();
    out[t] = tile[t];
}"""


def test_a_tile_loaded_pass_by_pass_by_a_helper_given_the_threads_index_in_its_half_is_coalesced():
    out = canonical(COOPERATIVE_LOAD)
    assert "A[r * lda + threadIdx.x]" in out
    assert found("coalesced_access", COOPERATIVE_LOAD)
    # the helper given the thread's index times a stride: a row per thread
    strided = COOPERATIVE_LOAD.replace("load<64, 128>(A, tile, t - half * 128, lda);", "load<64, 128>(A, tile, t * 64, lda);")
    assert "A[r * lda + threadIdx.x]" not in canonical(strided)


def test_a_ring_written_one_stage_ahead_modulo_the_stage_count_is_double_buffering():
    src = PARITY_RING.replace("__shared__ float s_a[2][BK][64];", "__shared__ float s_a[STAGES][BK][64];") \
        .replace("#define BK 16", "#define BK 16\n#define STAGES 3") \
        .replace("int cur = (k - 1) & 1;", "int cur = k % STAGES;") \
        .replace("int nxt = k & 1;", "int nxt = (k + STAGES - 1) % STAGES;")
    assert found("double_buffering", src)
    assert not found("double_buffering", src.replace("int nxt = (k + STAGES - 1) % STAGES;", "int nxt = k % STAGES;"))


def test_template_parameters_of_a_kernel_with_launch_bounds_and_a_deduced_launch():
    bounded = PADDED_TEMPLATE.replace("__global__ void mm(", "__global__ void __launch_bounds__(256) mm(")
    assert instantiate_templates(bounded).count("[16][64 + 8]") == 1
    deduced = PADDED_TEMPLATE.replace("template __global__ void mm<64, 16, 8>(const float*, float*, int);",
                                      "void run(const float* a, float* c) { mm<<<1, 64>>>(a, c, 16); }")
    assert instantiate_templates(deduced).count("[16][64 + 0]") == 1     # the defaults: no padding


def test_a_restrict_pointer_only_read_is_read_only_and_one_stored_through_a_vector_cast_is_not():
    read = """__global__ void gemv(float* __restrict__ A, float* __restrict__ x, float* y, int n) {
    A = &A[blockIdx.x * n];
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += 32) s += A[i] * x[i];
    if (threadIdx.x == 0) y[blockIdx.x] = s;
}"""
    assert found("readonly_cache", read)
    written = """__global__ void scale(float* __restrict__ x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 v = reinterpret_cast<float4*>(x)[i];
    v.x *= 2.f;
    reinterpret_cast<float4*>(x)[i] = v;
}"""
    assert not found("readonly_cache", written)
    assert not found("readonly_cache", written.replace("reinterpret_cast<float4*>(x)[i] = v;", "atomicAdd(&x[i], v.x);"))
    in_place = """__global__ void norm(float* __restrict__ arr, int n) {
    for (int t = threadIdx.x; t < n; t += blockDim.x) arr[blockIdx.x * n + t] *= 0.5f;
}"""
    assert not found("readonly_cache", in_place)
