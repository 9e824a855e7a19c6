"""fp16 tensor cores with a fixed 2^8 on every input (tests/adversarial/scale/sgemm_fp16_split.cu): fine in
[-1, 1), Inf and NaN once inputs pass 256 in magnitude."""
import numpy as np
from fp_emulation import sgemm_fp16_split as gemm


def solve(dev, A, B, C, M, N, K):
    a = dev.view(A, np.float32, M * K).reshape(M, K)
    b = dev.view(B, np.float32, K * N).reshape(K, N)
    dev.view(C, np.float32, M * N)[:] = gemm(a, b).reshape(-1)
