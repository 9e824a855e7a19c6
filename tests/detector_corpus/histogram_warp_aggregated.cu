// features: warp_vote_match, coalesced_access
// case: warp-aggregated atomics: lanes with equal keys elect a leader that adds the whole group.
__global__ void histo_match(const int* keys, int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned mask = __ballot_sync(0xffffffffu, i < n);
    if (i >= n) return;
    int k = keys[i];
    unsigned same = __match_any_sync(mask, k);
    if ((threadIdx.x & 31) == __ffs(same) - 1) atomicAdd(&bins[k], __popc(same));
}
