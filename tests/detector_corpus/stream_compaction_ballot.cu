// features: warp_vote_match, warp_shuffle, coalesced_access
// case: keep the positive values: a ballot gives each lane its output slot within the warp.
__global__ void compact_positive(const float* x, float* out, unsigned* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : -1.f;
    bool keep = v > 0.f;
    unsigned ballot = __ballot_sync(0xffffffffu, keep);
    int lane = threadIdx.x & 31;
    unsigned base = 0;
    if (lane == 0) base = atomicAdd(count, __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, 0);
    if (keep) out[base + __popc(ballot & ((1u << lane) - 1))] = v;
}
