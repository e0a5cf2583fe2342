"""The SASS instruction mix of ``schedule=None``'s kernel for float32 products, read on the CPU (no GPU).

For each product: the kernel ``tiledsl.gemm`` would run on an H200 (``default_schedule`` for the H200; a few-row
product's GEMV kernel), compiled with NVRTC for ``--arch``; ptxas's registers and spills; and the hottest loop of its
SASS (``tiledsl.sass``: nvdisasm on the cubin; the innermost loop with the most math): instructions per pass, FFMAs,
and the other instructions issued per 64 FFMAs, with the most frequent opcodes. The FFMAs' share of the loop bounds
the FMA pipe's share of the issue slots. The SASS is NVRTC's of this machine: the GPU's NVRTC may choose other
instructions (compare the registers with ptxas's on the GPU).

Run: ``python benchmarks/sass_mix.py`` (the default set: 1–16 rows × 22016 × 4096, x @ W and x @ W.T), or
``python benchmarks/sass_mix.py --products 16x22016x4096:NN 8x4096x4096:NT --json OUT.json``; ``--variant spare
twelve cap168`` (any of them) reads schedule=None's GEMV pick with a spare slot in staged A's ring, 12 rows per block
for 9-12 rows, x @ W.T's registers capped at 168, as ``benchmarks/gemv_hbm.py --variant`` times it. Needs nvdisasm
(``pip install nvidia-cuda-nvdisasm``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from gemv_hbm import VARIANTS

DEFAULT = [f"{m}x22016x4096:{lay}" for lay in ("NN", "NT") for m in (1, 2, 4, 8, 12, 16)]
ARCHES = ("sm_80", "sm_90")


def parse(spec: str) -> tuple[int, int, int, str]:
    """``MxNxK[:LAYOUT]`` (LAYOUT NN, NT, TN or TT, any case; A's letter first, T = column-major) → (M, N, K,
    LAYOUT); SystemExit naming the argument otherwise."""
    from search.families import parse_shape

    dims, _, layout = spec.partition(":")
    layout = (layout or "NN").upper()
    try:
        m, n, k = parse_shape(dims)
    except (argparse.ArgumentTypeError, ValueError):
        raise SystemExit(f"--products {spec!r}: expected MxNxK[:LAYOUT], e.g. 16x22016x4096:NN") from None
    if layout not in ("NN", "NT", "TN", "TT") or min(m, n, k) < 1:
        raise SystemExit(f"--products {spec!r}: sizes must be >= 1 and LAYOUT one of NN, NT, TN, TT")
    return m, n, k, layout


def mix_row(m: int, n: int, k: int, layout: str, arch: str, variants: tuple[str, ...] = (),
            precision: str = "ieee") -> dict:
    """One product's row: its schedule (``schedule=None``'s, or its ``variants``: ``gemv_hbm.variant_schedule``;
    ``precision`` the op's), registers, spills and hottest loop's mix (``other_per_64_ffma`` None where the loop has no
    FFMA: the tensor-core GEMV kernel of ``precision="3xtf32"``, whose mix names HMMA)."""
    from gemv_hbm import variant_schedule

    import tiledsl
    from search.space import describe
    from tiledsl.gemm import default_schedule
    from tiledsl.sass import loop_mix

    op = tiledsl.GemmOp(m, n, k, layout_a="row" if layout[0] == "N" else "col",
                        layout_b="row" if layout[1] == "N" else "col", precision=precision)
    h200 = tiledsl.Target.known("H200")
    schedule = (variant_schedule(op, h200, variants) if variants else None) or default_schedule(op, h200)
    kernel = tiledsl.compile(op, schedule, arch=arch)
    loop = loop_mix(kernel)
    row = {"m": m, "n": n, "k": k, "layout": layout, "kernel": kernel.name, "describe": describe(schedule),
           "registers": kernel.registers, "spill_bytes": kernel.spill_bytes, "schedule": schedule.to_dict()}
    if loop is not None:
        other = loop.other_per("FFMA")
        row.update(loop_instructions=loop.instructions, ffma=loop.counts.get("FFMA", 0),
                   other_per_64_ffma=round(other, 1) if math.isfinite(other) else None, counts=loop.counts)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--products", nargs="+", default=DEFAULT, help="MxNxK[:LAYOUT] (default: %(default)s)")
    ap.add_argument("--arch", default="sm_90", choices=ARCHES, help="compile for (default %(default)s)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--variant", nargs="*", choices=VARIANTS, default=[],
                    help="schedule=None's GEMV pick with a spare slot in staged A's ring (spare), 12 rows per block "
                         "for 9-12 rows (twelve), x @ W.T's registers capped at 168 (cap168), as benchmarks/gemv_hbm.py "
                         "--variant times them (default: none)")
    ap.add_argument("--precision", choices=("ieee", "3xtf32"), default="ieee",
                    help="the op's precision (3xtf32: 9-16 rows on the tensor-core GEMV kernel)")
    args = ap.parse_args()
    products = [parse(p) for p in args.products]  # every argument checked before the first compile
    from tiledsl.errors import ToolchainError
    from tiledsl.sass import find_nvdisasm

    try:
        find_nvdisasm()
        rows = [mix_row(*p, args.arch, tuple(args.variant), args.precision) for p in products]
    except ToolchainError as exc:
        raise SystemExit(f"sass_mix: {exc}") from None
    print("| product | kernel | registers | loop instructions | FFMA | other per 64 FFMA | most frequent others |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        others = sorted(((c, op) for op, c in r.get("counts", {}).items() if op != "FFMA"), reverse=True)[:6]
        per = r.get("other_per_64_ffma")
        print(f"| {r['m']}×{r['n']}×{r['k']} {r['layout']} | {r['describe']} "
              f"| {r['registers']}{' (spills)' if r['spill_bytes'] else ''} | {r.get('loop_instructions', '—')} "
              f"| {r.get('ffma', '—')} | {'—' if per is None else per} | {', '.join(f'{op} {c}' for c, op in others)} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python benchmarks/sass_mix.py " + " ".join(sys.argv[1:]), "arch": args.arch,
                       "variants": args.variant, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
