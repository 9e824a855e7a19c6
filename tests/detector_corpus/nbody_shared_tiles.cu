// features: smem_tiling, loop_unrolling, vector_loads, coalesced_access
// case: all-pairs n-body: positions staged tile by tile in shared memory and reused by every thread.
#define TB 256
__global__ void nbody_tiles(const float4* pos, float3* acc_out, int n, float eps2) {
    __shared__ float4 sh[TB];
    int i = blockIdx.x * TB + threadIdx.x;
    float4 p = i < n ? pos[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    float ax = 0.f, ay = 0.f, az = 0.f;
    for (int t = 0; t < n; t += TB) {
        sh[threadIdx.x] = t + threadIdx.x < n ? pos[t + threadIdx.x] : make_float4(0.f, 0.f, 0.f, 0.f);
        __syncthreads();
#pragma unroll 8
        for (int j = 0; j < TB; ++j) {
            float dx = sh[j].x - p.x, dy = sh[j].y - p.y, dz = sh[j].z - p.z;
            float inv = rsqrtf(dx * dx + dy * dy + dz * dz + eps2);
            float s = sh[j].w * inv * inv * inv;
            ax += dx * s; ay += dy * s; az += dz * s;
        }
        __syncthreads();
    }
    if (i < n) acc_out[i] = make_float3(ax, ay, az);
}
