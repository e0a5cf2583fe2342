"""A transformer MLP block (LLaMA-style SwiGLU) computed with ``tiledsl.gemm`` on torch tensors, checked
against torch.

    h   = silu(x @ W_gate.T) * (x @ W_up.T)        x: (tokens, d_model), W_gate, W_up: (d_ff, d_model)
    out = x + h @ W_down.T                         W_down: (d_model, d_ff)

torch's ``nn.Linear`` stores weights as (out_features, in_features); ``W.T`` is a column-major view that
``tiledsl.gemm`` reads in place (no copy). torch tensors go in, torch tensors come out, on the same device.

Run: ``python examples/torch_mlp.py [--tokens 2048 --d-model 4096 --d-ff 11008]`` (needs torch and a CUDA GPU;
without either it says so in one line and exits 1).
"""

from __future__ import annotations

import argparse
import sys

import tiledsl


def mlp_tiledsl(x, w_gate, w_up, w_down):
    """The block with every matrix product on tiledsl (elementwise parts in torch)."""
    import torch

    gate = tiledsl.gemm(x, w_gate.T)
    up = tiledsl.gemm(x, w_up.T)
    h = torch.nn.functional.silu(gate) * up
    return tiledsl.gemm(h, w_down.T, x.clone(), beta=1.0)  # out = h @ W_down.T + x, the residual in the epilogue


def mlp_torch(x, w_gate, w_up, w_down):
    import torch

    h = torch.nn.functional.silu(x @ w_gate.T) * (x @ w_up.T)
    return x + h @ w_down.T


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--d-model", type=int, default=4096)
    ap.add_argument("--d-ff", type=int, default=11008)
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        return "examples/torch_mlp.py: needs torch (pip install torch)"
    try:
        tiledsl.require_gpu()
    except tiledsl.LaunchError as exc:
        return f"examples/torch_mlp.py: no GPU: {exc}"
    if not torch.cuda.is_available():
        return "examples/torch_mlp.py: no GPU: torch sees no CUDA device (a CPU-only torch build?)"
    from tiledsl.timing import time_gpu

    g = torch.Generator(device="cuda").manual_seed(0)
    d, f = args.d_model, args.d_ff
    worst = {}
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
        x = torch.randn(args.tokens, d, device="cuda", generator=g).to(dtype)
        w_gate = (torch.randn(f, d, device="cuda", generator=g) / d ** 0.5).to(dtype)
        w_up = (torch.randn(f, d, device="cuda", generator=g) / d ** 0.5).to(dtype)
        w_down = (torch.randn(d, f, device="cuda", generator=g) / f ** 0.5).to(dtype)
        got = mlp_tiledsl(x, w_gate, w_up, w_down)
        assert isinstance(got, torch.Tensor) and got.dtype == dtype and got.device == x.device
        ref = mlp_torch(*(t.double() for t in (x, w_gate, w_up, w_down)))
        err = float((got.double() - ref).norm() / ref.norm())
        worst[str(dtype)] = (err, tol)
        t_tiledsl = time_gpu(lambda: mlp_tiledsl(x, w_gate, w_up, w_down)).median_ms  # noqa: B023
        t_torch = time_gpu(lambda: mlp_torch(x, w_gate, w_up, w_down)).median_ms  # noqa: B023
        flop = 2 * args.tokens * d * f * 3
        print(f"{str(dtype):15s} tokens {args.tokens}, d_model {d}, d_ff {f}: rel. error vs float64 torch {err:.1e} "
              f"(limit {tol:g}); tiledsl {t_tiledsl:.2f} ms ({flop / t_tiledsl / 1e9:.1f} TFLOP/s), torch "
              f"{t_torch:.2f} ms ({flop / t_torch / 1e9:.1f} TFLOP/s)")
    bad = {k: v for k, v in worst.items() if v[0] > v[1]}
    return 0 if not bad else f"examples/torch_mlp.py: error above the limit: {bad}"


if __name__ == "__main__":
    sys.exit(main())
