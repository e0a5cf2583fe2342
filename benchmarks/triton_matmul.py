"""A Triton autotuned matmul, the peer our users compare tensor-core GEMMs with (benchmarks only).

``triton_matmul(a, b)`` computes a @ b for 2-D torch CUDA tensors (float16/bfloat16, any strides) with
float32 accumulation, autotuned over eight block configurations at the first call of each (M, N, K).
Imported only on a machine with Triton and a GPU.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

CONFIGS = [
    triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=st, num_warps=wp)
    for bm, bn, bk, st, wp in ((128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4),
                               (128, 128, 64, 4, 8), (128, 256, 32, 4, 8), (64, 256, 64, 4, 4),
                               (128, 64, 64, 4, 4), (64, 128, 64, 4, 4))
]


@triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, s_am, s_ak, s_bk, s_bn, s_cm, s_cn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = GROUP * tiles_n
    first_m = (pid // group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % group) % rows
    pid_n = (pid % group) // rows
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a = a_ptr + offs_m[:, None] * s_am + offs_k[None, :] * s_ak
    b = b_ptr + offs_k[:, None] * s_bk + offs_n[None, :] * s_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        k_left = K - k0 * BK
        acc += tl.dot(tl.load(a, mask=offs_k[None, :] < k_left, other=0.0),
                      tl.load(b, mask=offs_k[:, None] < k_left, other=0.0))
        a += BK * s_ak
        b += BK * s_bk
    c = c_ptr + offs_m[:, None] * s_cm + offs_n[None, :] * s_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def triton_matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a (M×K) @ b (K×N) -> (M×N) in a's dtype, float32 accumulation, on the GPU."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype) if out is None else out
    grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)  # noqa: E731
    _matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1))
    return c
