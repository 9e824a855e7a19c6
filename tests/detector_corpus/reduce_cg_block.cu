// features: cooperative_groups, warp_shuffle, coalesced_access
// case: cooperative-groups reduction: tiled_partition and cg::reduce.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void reduce_cg(const float* x, float* out, int n) {
    cg::thread_block blk = cg::this_thread_block();
    auto tile = cg::tiled_partition<32>(blk);
    int i = blk.group_index().x * blk.size() + blk.thread_rank();
    float v = i < n ? x[i] : 0.f;
    v = cg::reduce(tile, v, cg::plus<float>());
    if (tile.thread_rank() == 0) atomicAdd(out, v);
}
