"""3xTF32 (tests/adversarial/scale/sgemm_3xtf32.cu), tf32 parts truncated: right at every scale."""
import numpy as np
from fp_emulation import sgemm_3xtf32 as gemm


def solve(dev, A, B, C, M, N, K):
    a = dev.view(A, np.float32, M * K).reshape(M, K)
    b = dev.view(B, np.float32, K * N).reshape(K, N)
    dev.view(C, np.float32, M * N)[:] = gemm(a, b).reshape(-1)
