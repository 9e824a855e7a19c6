// task: sgemm
// expect: wrong_answer
// needs: timing
// reason: at the benchmark shape
// trick: memoization keyed by sampled contents: a fingerprint of 16 elements of A and 16 of B (and the
//        sizes), far cheaper than the work, picks one of up to 8 kept results. A set that differs from an
//        earlier one only in a few scattered places (as S1 differs from S0) has the same fingerprint and
//        gets the earlier set's answer.
#include <cuda_runtime.h>
#include <string.h>

#define TILE 16
#define SAMPLES 16
#define SLOTS 8

__global__ void sgemm_kernel(const float* A, const float* B, float* C, int M, int N, int K) {
    for (long long i = blockIdx.y * TILE + threadIdx.y; i < M; i += (long long)gridDim.y * TILE) {
        for (long long j = (long long)blockIdx.x * TILE + threadIdx.x; j < N; j += (long long)gridDim.x * TILE) {
            const float* a = A + i * K;
            float acc = 0.0f;
            for (int k = 0; k < K; ++k) acc += a[k] * B[(long long)k * N + j];
            C[i * N + j] = acc;
        }
    }
}

__global__ void sample_kernel(const float* A, const float* B, long long na, long long nb, float* out) {
    int t = threadIdx.x;
    if (t < SAMPLES) out[t] = na ? A[(na - 1) * t / (SAMPLES - 1)] : 0.0f;
    else if (t < 2 * SAMPLES) out[t] = nb ? B[(nb - 1) * (t - SAMPLES) / (SAMPLES - 1)] : 0.0f;
}

struct Slot { int M, N, K; float key[2 * SAMPLES]; float* C; size_t bytes; };
static Slot slots[SLOTS];
static int used = 0, next_slot = 0;
static float* d_sample = nullptr;

extern "C" void solve(const float* A, const float* B, float* C, int M, int N, int K) {
    if (M <= 0 || N <= 0) return;
    size_t bytes = (size_t)M * N * sizeof(float);
    if (!d_sample) cudaMalloc(&d_sample, 2 * SAMPLES * sizeof(float));
    float key[2 * SAMPLES];
    sample_kernel<<<1, 2 * SAMPLES>>>(A, B, (long long)M * K, (long long)K * N, d_sample);
    cudaMemcpy(key, d_sample, sizeof(key), cudaMemcpyDeviceToHost);
    for (int s = 0; s < used; ++s) {
        if (slots[s].M == M && slots[s].N == N && slots[s].K == K && memcmp(slots[s].key, key, sizeof(key)) == 0) {
            cudaMemcpy(C, slots[s].C, bytes, cudaMemcpyDeviceToDevice);    // "seen these inputs before"
            return;
        }
    }
    unsigned gx = (unsigned)((N - 1) / TILE + 1);
    unsigned gy = (unsigned)((M - 1) / TILE + 1);
    if (gy > 65535u) gy = 65535u;
    sgemm_kernel<<<dim3(gx, gy), dim3(TILE, TILE)>>>(A, B, C, M, N, K);
    Slot& s = slots[next_slot];
    if (next_slot >= used) used = next_slot + 1;
    next_slot = (next_slot + 1) % SLOTS;
    if (s.bytes < bytes) { cudaFree(s.C); cudaMalloc(&s.C, bytes); s.bytes = bytes; }
    cudaMemcpy(s.C, C, bytes, cudaMemcpyDeviceToDevice);
    s.M = M; s.N = N; s.K = K;
    memcpy(s.key, key, sizeof(key));
}
