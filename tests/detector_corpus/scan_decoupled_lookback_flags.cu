// features: decoupled_lookback_scan, warp_shuffle, coalesced_access
// case: single-pass scan: warp-shuffle tile scan, separate flag and value arrays with fences, look-back.
#define TB 1024
__global__ void scan_single_pass(const int* in, int* out, int n, volatile int* flags, volatile int* agg,
                                 volatile int* incl, unsigned* ticket) {
    __shared__ int warp_tot[32];
    __shared__ int tile_id, base;
    if (threadIdx.x == 0) tile_id = atomicAdd(ticket, 1);
    __syncthreads();
    int id = tile_id;
    int i = id * TB + threadIdx.x, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int v = i < n ? in[i] : 0;
    for (int o = 1; o < 32; o <<= 1) {
        int t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o) v += t;
    }
    if (lane == 31) warp_tot[w] = v;
    __syncthreads();
    if (w == 0) {
        int t = warp_tot[lane];
        for (int o = 1; o < 32; o <<= 1) {
            int u = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += u;
        }
        warp_tot[lane] = t;
    }
    __syncthreads();
    if (w > 0) v += warp_tot[w - 1];
    if (threadIdx.x == TB - 1) {
        int total = v, prefix = 0;
        if (id == 0) { incl[0] = total; __threadfence(); flags[0] = 2; }
        else {
            agg[id] = total; __threadfence(); flags[id] = 1;
            int p = id - 1;
            while (p >= 0) {
                int f = flags[p];
                if (f == 0) continue;
                __threadfence();
                if (f == 2) { prefix += incl[p]; break; }
                prefix += agg[p];
                --p;
            }
            incl[id] = prefix + total; __threadfence(); flags[id] = 2;
        }
        base = prefix;
    }
    __syncthreads();
    if (i < n) out[i] = v + base;
}
