"""How the GPU's tensor cores round their float32 accumulation, and what it does to ``precision="3xtf32"``.

Run on a GPU: ``python benchmarks/tc_accumulation.py --out benchmarks/results/tc_accumulation_h200.json``.

Two measurements (docs/gemm.md, "Few rows on the tensor cores", "Accumulation in chunks"):

1. **One mma.sync.m16n8k8 TF32** whose exact result lies strictly between two float32 values: accumulator 1, one
   product 1 · 1.5·2^-24, the other products 0. Rounded to nearest the sum is 1 + 2^-23; cut toward zero it is 1
   (what Fasi, Higham, Mikaitis and Pranesh measured on V100, T4 and A100; sm_90 is what this shows). The same for
   −1 with the product −1.5·2^-24 (−1 − 2^-23 or −1).
2. **The tensor-core GEMV kernel with one accumulator chain per K slice** (its source with ``CHUNK`` set past any
   slice: every sum the tensor cores' own) beside the kernel as shipped (its sums restarted every ``CHUNK`` k16 steps
   and added with rounding), on 16×64×4096 and 16×32×14336 (x @ W.T, one slice), fresh uniform(−1, 1) data: the
   largest |C − float64| / max |float64| of each, beside float32's bound 1e-5·max(1, √(K / 4096)). The kernels are
   compiled here from their emitted source with CuPy's NVRTC and launched on the plan's grid.

Prints both and writes them with the command, GPU and date.
"""

from __future__ import annotations

import argparse

import numpy as np
from beside import gpu_name, write_results
from gpu_check import gpu_or_exit

PROBE = r"""
extern "C" __global__ void probe(const float* c_in, float* d_out) {
  // lane 0 holds A(0, 0) = 1 and B(0, 0) = b; every other element of A and B is 0; C(0, 0) = c_in[0]
  const int lane = threadIdx.x;
  const unsigned one = __float_as_uint(1.0f), b = __float_as_uint(c_in[1]);
  const unsigned a0 = lane == 0 ? one : 0u, b0 = lane == 0 ? b : 0u;
  float d0 = lane == 0 ? c_in[0] : 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(0u), "r"(0u), "r"(0u), "r"(b0), "r"(0u));
  if (lane == 0) d_out[0] = d0;
}
"""


def probe(arch: str) -> list[dict]:
    """Measurement 1: for C = ±1 the mma's result, and which rounding it shows."""
    import cupy as cp

    kernel = cp.RawKernel(PROBE, "probe", options=(f"-arch={arch}",))
    rows = []
    for c in (1.0, -1.0):
        b = np.float32(np.copysign(1.5 * 2.0**-24, c))  # a TF32 value (one mantissa bit), of C's sign: |C + b| lies
        # strictly between |C| and |C| + 2^-23, nearer the latter (a b of the other sign would make a tie)
        out = cp.zeros(1, cp.float32)
        kernel((1,), (32,), (cp.asarray([c, b], cp.float32), out))
        got = float(out.get()[0])
        nearest = float(np.float32(c) + np.float32(np.copysign(2.0**-23, c)))
        rows.append(dict(kind="probe", c=c, b=float(b), result=got, exact=c + float(b),
                         rounding="toward zero" if got == c else "to nearest" if got == nearest else "other"))
        print(f"mma.sync m16n8k8 TF32: C = {c:+.0f} plus {b:+.3g} -> {got!r} ({rows[-1]['rounding']})", flush=True)
    return rows


def chain_error(m: int, n: int, k: int, chain: bool, arch: str) -> float:
    """Measurement 2 for one product: the kernel's largest error relative to max |float64|, with one chain per slice
    (``chain``) or its chunks."""
    import cupy as cp

    import tiledsl
    from tiledsl.gemm.family import GEMM
    from tiledsl.gemm.schedule import GemmSchedule

    op = tiledsl.GemmOp(m, n, k, layout_b="col", precision="3xtf32")
    s = GemmSchedule(kernel="gemv", mma="mma_sync", bm=16, bn=128, bk=16, rn=32, unroll=2, vec=4)
    ks = GEMM.emit(op, s)
    source = ks.source
    if chain:
        line = next(ln for ln in source.splitlines() if ln.startswith("constexpr int CHUNK ="))
        source = source.replace(line, "constexpr int CHUNK = 1 << 20;  // one chain per slice")
    fn = cp.RawModule(code=source, options=(f"-arch={arch}", "--std=c++17")).get_function(ks.name)
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    w = rng.uniform(-1, 1, (n, k)).astype(np.float32)  # W [N, K]: B = W.T, column-major
    c = cp.full((m, n), cp.nan, cp.float32)
    grid = GEMM.plan(op, s, tiledsl.Target.current()).grid
    fn(grid, ks.block, (cp.asarray(a), cp.asarray(w), c, np.int32(m), np.int32(n), np.int32(k), np.int64(k),
                        np.int64(k), np.int64(n), np.float32(1.0)))
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    return float(np.abs(c.get() - ref).max() / np.abs(ref).max())


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/tc_accumulation_h200.json")
    args = ap.parse_args()
    target = gpu_or_exit("benchmarks/tc_accumulation.py")
    arch = target.arch
    rows = probe(arch)
    for m, n, k in ((16, 64, 4096), (16, 32, 14336)):
        bound = 1e-5 * max(1.0, (k / 4096) ** 0.5)
        errs = {how: chain_error(m, n, k, how == "one chain", arch) for how in ("chunks", "one chain")}
        rows.append(dict(kind="kernel", m=m, n=n, k=k, bound=bound, **{f"err_{h.replace(' ', '_')}": e
                                                                       for h, e in errs.items()}))
        print(f"{m}x{n}x{k} x @ W.T: chunks {errs['chunks']:.2e}, one chain per slice {errs['one chain']:.2e} "
              f"(float32's bound {bound:.1e})", flush=True)
    write_results(args.out, gpu_name(), rows, cp.__version__)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
