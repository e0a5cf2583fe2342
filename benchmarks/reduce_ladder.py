"""The reduction ladder v1…v7 on our GPU, beside cupy.sum (CUB) and torch.sum, in one run.

Run on a GPU: ``python benchmarks/reduce_ladder.py [--log2n 28] [--out benchmarks/results/reduce_ladder_h200.json]``.

Reproduces the ladder's reference table (``docs/reduce.md``: time, bandwidth, speed-up over v1) for a full
float32 sum of 2^28 uniform random values (1 GiB, 17× the H200's L2). Presets: ``schedules/reduce/presets.json``.
Every result is checked against a float64 sum (cupy.sum(x, dtype=float64)) before it is timed, within the
bound of its longest sequential float32 chain (``_error_bound``): v1 adds every element into one float32
with an atomic, so its result may be far off (at 2^28 values near 1 the accumulator stalls at 2^25). Timing: see
benchmarks/reduce_common.py. GB/s = 4·n / time (the 4-byte result is negligible).
"""

from __future__ import annotations

import argparse

import numpy as np
from gpu_check import gpu_or_exit
from reduce_common import calls_for, environment, markdown, timed_ms, torch_or_none, write_json

import tiledsl


def _error_bound(n: int, s, sm_count: int) -> int:
    """Float32 additions in the longest sequential chain of ``s`` (error ≤ that many eps·Σ|x| for x > 0).

    A thread adds ceil(n / (grid·block)) elements in a row, the block tree adds log2(block) levels, and an
    atomic combine adds every block's value (v2–v7: ``split`` of them) or every element (v1: n) into one
    float32 in sequence (the classic bound (m − 1)·u·Σ|x|, u = eps/2, of a sequential sum of m terms).
    """
    from tiledsl.reduce import ReduceOp, plan

    p = plan(ReduceOp(shape=(n,)), s, sm_count)
    per_thread = -(-n // (p.grid * s.block))
    chain = n if s.strategy == "atomic" else (p.split if s.combine == "atomic" else 0)
    return chain + per_thread + s.block.bit_length()


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=28)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--out", default="benchmarks/results/reduce_ladder_h200.json")
    args = ap.parse_args()
    gpu_or_exit("benchmarks/reduce_ladder.py")
    n = 1 << args.log2n
    x = cp.random.default_rng(1).random(n, dtype=cp.float32) + 0.5  # uniform [0.5, 1.5): no zeros
    nbytes = x.nbytes
    ref = float(cp.sum(x, dtype=cp.float64))
    abs_sum = ref  # all positive
    eps = float(np.finfo(np.float32).eps)
    rows: list[dict] = []

    def add(name: str, ms: float, err: float | None, note: str = "") -> None:
        rows.append({"name": name, "time_ms": ms, "gbps": nbytes / (ms * 1e-3) / 1e9, "rel_err": err, "note": note})
        print(f"{name:28s} {ms:9.4f} ms {nbytes / (ms * 1e-3) / 1e9:8.1f} GB/s  err {err}", flush=True)

    sm = tiledsl.Target.current().sm_count
    for name, s in tiledsl.presets("reduce").items():
        got = float(tiledsl.reduce(x, "sum", schedule=s))
        err = abs(got - ref) / abs_sum
        bound = _error_bound(n, s, sm) * eps
        if not err <= bound:
            raise SystemExit(f"{name}: relative error {err} exceeds {bound}; not timing a wrong kernel")
        slow = s.strategy == "atomic"
        ms = timed_ms(lambda s=s: tiledsl.reduce(x, "sum", schedule=s), calls=1 if slow else calls_for(nbytes),
                      repeat=3 if slow else args.repeat, warmup=1)
        add(name, ms, err, tiledsl.registry._raw("reduce")[name]["note"])
    got = float(cp.sum(x))
    add("cupy.sum (CUB)", timed_ms(lambda: cp.sum(x), calls_for(nbytes), args.repeat), abs(got - ref) / abs_sum)
    torch = torch_or_none()
    if torch is not None:
        tx = torch.as_tensor(x, device="cuda")
        got = float(torch.sum(tx))
        add("torch.sum", timed_ms(lambda: torch.sum(tx), calls_for(nbytes), args.repeat), abs(got - ref) / abs_sum)
    v1 = rows[0]["time_ms"]
    table = [[r["name"], f"{r['time_ms']:.4f}", f"{r['gbps']:.1f}", f"{v1 / r['time_ms']:.0f}×",
              f"{r['rel_err']:.1e}"] for r in rows]
    print(f"\nfull float32 sum of 2^{args.log2n} elements ({nbytes / 2**30:.1f} GiB)\n")
    print(markdown(["kernel", "time (ms)", "GB/s", "vs v1", "rel. error vs float64"], table))
    write_json(args.out, {**environment(), "n": n, "dtype": "float32", "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
