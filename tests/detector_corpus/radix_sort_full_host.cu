// features: radix_sort, coalesced_access
// case: an 8-bit LSD radix sort driven from the host: count, scan (on the device, one thread), scatter.
__global__ void count_digits(const unsigned* k, unsigned* cnt, int n, int shift) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&cnt[(k[i] >> shift) & 255], 1u);
}
__global__ void scan_256(unsigned* cnt) {
    if (threadIdx.x == 0) { unsigned s = 0; for (int d = 0; d < 256; ++d) { unsigned c = cnt[d]; cnt[d] = s; s += c; } }
}
__global__ void scatter_serial(const unsigned* k, unsigned* out, unsigned* off, int n, int shift) {
    if (threadIdx.x == 0 && blockIdx.x == 0)
        for (int i = 0; i < n; ++i) out[off[(k[i] >> shift) & 255]++] = k[i];
}
void radix_sort(unsigned* a, unsigned* b, unsigned* cnt, int n) {
    for (int shift = 0; shift < 32; shift += 8) {
        cudaMemset(cnt, 0, 256 * sizeof(unsigned));
        count_digits<<<(n + 255) / 256, 256>>>(a, cnt, n, shift);
        scan_256<<<1, 32>>>(cnt);
        scatter_serial<<<1, 1>>>(a, b, cnt, n, shift);
        unsigned* t = a; a = b; b = t;
    }
}
