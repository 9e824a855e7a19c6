"""Rules for SGEMM micro-kernels written with float4 accumulators (the Turing SGEMM steps' style), each
probe labelled from the definitions in docs/features.md before the detector ran on it, with a near miss."""

from __future__ import annotations

from test_detector_rules import found


# a 4x1 micro-kernel: one loaded B value feeds the four members of a float4 accumulator (column-major tile)
FLOAT4_MEMBERS = """
__global__ void sgemm_4x1(int K, const float* A, const float* B, float* C) {
    __shared__ float sa[32 * 32];
    __shared__ float sb[32 * 32];
    int tx = threadIdx.x, r = (tx & 7) << 2, col = tx >> 3;
    float4 acc;
    acc.x = 0.f, acc.y = 0.f, acc.z = 0.f, acc.w = 0.f;
    float b;
    for (int k0 = 0; k0 < K; k0 += 32) {
        sa[tx] = A[k0 * 32 + tx];
        sb[tx] = B[k0 + tx];
        __syncthreads();
        for (int k = 0; k < 32; ++k) {
            b = sb[col * 32 + k];
            acc.x += sa[k * 32 + r] * b;
            acc.y += sa[k * 32 + r + 1] * b;
            acc.z += sa[k * 32 + r + 2] * b;
            acc.w += sa[k * 32 + r + 3] * b;
        }
        __syncthreads();
    }
    *(float4*)(&C[col * 32 + r]) = acc;
}
"""


def test_float4_members_sharing_a_loaded_operand_are_register_blocking():
    assert found("register_blocking", FLOAT4_MEMBERS)
    # near miss: an axpy of float4s by a fixed scale (each loaded value feeds one FMA)
    axpy = """
__global__ void axpy4(const float4* x, float4* y, float alpha, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float4 v = y[i];
        float4 u = x[i];
        v.x += u.x * alpha;
        v.y += u.y * alpha;
        y[i] = v;
    }
}
"""
    assert not found("register_blocking", axpy)
    # near miss: the members take products of different operands (an elementwise product)
    elementwise = FLOAT4_MEMBERS.replace("sa[k * 32 + r + 1] * b", "sa[k * 32 + r + 1] * sb[k]").replace(
        "acc.x += sa[k * 32 + r] * b;", "acc.x += sa[k * 32 + r] * sb[k + 1];").replace(
        "acc.z += sa[k * 32 + r + 2] * b;", "acc.z += sa[k * 32 + r + 2] * sb[k + 2];").replace(
        "acc.w += sa[k * 32 + r + 3] * b;", "acc.w += sa[k * 32 + r + 3] * sb[k + 3];")
    assert elementwise != FLOAT4_MEMBERS and not found("register_blocking", elementwise)


# the same micro-kernel with the B operand in a pair of registers, the next one loaded while this one is used
FLOAT4_PAIR = """
__global__ void sgemm_pair(int K, const float* sb, float4* C) {
    float4 acc[4], bv[2];
    float4 a = make_float4(1.f, 1.f, 1.f, 1.f);
    bv[0] = *((const float4*)(sb));
    for (int k = 0; k < K; ++k) {
        bv[(k + 1) & 1] = *((const float4*)(sb + 4 * (k + 1)));
        acc[0].x += a.x * bv[k & 1].x;
        acc[0].y += a.y * bv[k & 1].x;
        acc[1].x += a.x * bv[k & 1].y;
        acc[1].y += a.y * bv[k & 1].y;
    }
    C[threadIdx.x] = acc[0];
}
"""


def test_float4_members_sharing_a_register_of_a_pair_are_register_blocking():
    assert found("register_blocking", FLOAT4_PAIR)
    # near miss: each member's product takes its own member of the pair (an elementwise product)
    own = FLOAT4_PAIR.replace("acc[0].y += a.y * bv[k & 1].x;", "acc[0].y += a.y * bv[k & 1].y;").replace(
        "acc[1].y += a.y * bv[k & 1].y;", "acc[1].y += a.y * bv[k & 1].w;").replace(
        "acc[1].x += a.x * bv[k & 1].y;", "acc[1].x += a.x * bv[k & 1].z;")
    assert own != FLOAT4_PAIR and not found("register_blocking", own)


# a tile stored through a vector cast of the shared array (`((float4*)sa)[tx] = v`) and read by other threads
# as a product operand in the loop over the tile
CAST_STORE = """
__global__ void sgemm_cast(int K, const float* A, const float* B, float* C) {
    __shared__ float sa[32 * 32];
    int tx = threadIdx.x, r = (tx & 7) << 2, col = tx >> 3;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += 32) {
        float4 v = *((const float4*)(&A[k0 * 32 + 4 * tx]));
        ((float4 *)sa)[tx] = v;
        __syncthreads();
        for (int k = 0; k < 32; ++k) acc += sa[(k << 5) + r] * B[k * 32 + col];
        __syncthreads();
    }
    C[tx] = acc;
}
"""


def test_a_tile_stored_through_a_vector_cast_and_read_in_the_tile_loop_is_tiling():
    assert found("smem_tiling", CAST_STORE)
    # near miss: the array is filled the same way but never read in a loop over the tile
    unread = CAST_STORE.replace("acc += sa[(k << 5) + r] * B[k * 32 + col];", "acc += B[k * 32 + col];")
    assert unread != CAST_STORE and not found("smem_tiling", unread)


# the tile read back in the loop over it as whole float4 registers through a cast of an element's address
CAST_LOAD = """
__global__ void sgemm_cast_load(int K, const float* A, float* C) {
    __shared__ float sa[32 * 32];
    int tx = threadIdx.x, r = (tx & 7) << 2;
    float4 a, acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k0 = 0; k0 < K; k0 += 32) {
        float4 v = *((const float4*)(&A[k0 * 32 + 4 * tx]));
        ((float4 *)sa)[tx] = v;
        __syncthreads();
        for (int k = 0; k < 32; ++k) {
            a = *((float4 *)(&sa[(k << 5) + r]));
            acc.x += a.x; acc.y += a.y; acc.z += a.z; acc.w += a.w;
        }
        __syncthreads();
    }
    *((float4*)(&C[4 * tx])) = acc;
}
"""


def test_a_tile_read_as_vector_registers_in_the_tile_loop_is_tiling():
    assert found("smem_tiling", CAST_LOAD)
    # near miss: the thread reads back only the slot it stored, whatever the loop index
    own = CAST_LOAD.replace("&sa[(k << 5) + r]", "&sa[4 * tx]")
    assert own != CAST_LOAD and not found("smem_tiling", own)
