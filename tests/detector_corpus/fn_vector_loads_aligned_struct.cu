// features: vector_loads, coalesced_access, readonly_cache
// case: 16-byte accesses through a user struct declared alignas(16): no vector type or cast in the source,
// but ptxas emits LDG.E.128 / STG.E.128, so only the build shows the feature.
struct alignas(16) Quad {
    float a, b, c, d;
};
__global__ void scale_quads(const Quad* __restrict__ in, Quad* __restrict__ out, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Quad q = in[i];
        out[i] = Quad{q.a * s, q.b * s, q.c * s, q.d * s};
    }
}
