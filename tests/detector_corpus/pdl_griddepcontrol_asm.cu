// features: programmatic_dependent_launch, coalesced_access
// case: programmatic dependent launch through the PTX griddepcontrol instructions.
__global__ void consumer_kernel(const float* prev, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (i < n) out[i] = prev[i] * 0.5f;
    asm volatile("griddepcontrol.launch_dependents;");
}
