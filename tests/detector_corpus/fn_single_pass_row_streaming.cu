// features: single_pass_row, warp_shuffle, kernel_fusion, cache_hints, coalesced_access, fast_math_intrinsics, loop_unrolling
// case: softmax with each row read once with streaming loads (__ldcs) into registers, reduced with
// shuffles, and written with streaming stores (__stcs) from those registers.
template <int PER_LANE>
__global__ void softmax_row_streaming(const float* x, float* y, int cols) {
    const int lane = threadIdx.x % 32;
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float v[PER_LANE];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        v[i] = __ldcs(row + i * 32 + lane);
        m = fmaxf(m, v[i]);
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {
        v[i] = __expf(v[i] - m);
        s += v[i];
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    const float inv = 1.f / s;
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) __stcs(out + i * 32 + lane, v[i] * inv);
}
template __global__ void softmax_row_streaming<8>(const float*, float*, int);
