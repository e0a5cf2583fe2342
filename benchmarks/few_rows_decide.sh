#!/bin/bash
# The GPU run that decides the few-row kernels built without a GPU (docs/gemm.md: "A spare slot in the ring, twelve
# rows per block, x @ W.T's registers capped" and "x @ W.T with its lanes in groups"): their GPU tests and memcheck,
# then the sweeps that time them beside schedule=None and cuBLAS. Usage (on a GPU machine, from the repository root):
#     bash benchmarks/few_rows_decide.sh DIR [STEP ...]
# STEP: any of tests, memcheck, few_rows, hbm_none, hbm_variants, hbm_small, hbm_fused (default: all, in that order;
# a device call of at most 10 minutes takes a few of them). DIR gets decide.log (header: commit, date, GPU, driver;
# each step's command, exit status and summary lines) and each step's JSON and full log. Steps stop at nothing: a failed test is reported and the sweeps still run (each
# checks its own results against float64 before timing). Exit status: 0 when every step did.
# Expected on an H200: the tests about 1-2 minutes, memcheck 1-2, gemv_fused few_rows --quick about 2, each gemv_hbm
# run about 1-3 (not yet run: estimates from the sweeps' earlier runs).
set -u
dir=${1:?usage: bash benchmarks/few_rows_decide.sh DIR}
shift
script=benchmarks/few_rows_decide.sh default_steps="tests memcheck few_rows hbm_none hbm_variants hbm_small hbm_fused" asked_steps="$*"
source "$(dirname "$0")/decide_steps.sh"
pytest=(python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gemm_gpu.py)
step tests "${pytest[@]}" -k "spare_slot or twelve_rows or column_b_ring or smem_a or gemv"
step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "${pytest[@]}" \
  -k "(spare_slot_sums and 12-8-13) or (twelve_rows_per_block and 10-7-13) or (column_b_ring and (5-7-130 or 16-33-611 or 4-3-36))"
step few_rows python3 benchmarks/gemv_fused.py --family few_rows --quick --out "$dir/gemv_few_rows.json"
step hbm_none python3 benchmarks/gemv_hbm.py --m 8 12 16 --out "$dir/gemv_hbm_none.json"
step hbm_variants python3 benchmarks/gemv_hbm.py --m 8 12 16 --variant twelve spare ring --out "$dir/gemv_hbm_variants.json"
step hbm_small python3 benchmarks/gemv_hbm.py --m 1 2 4 --out "$dir/gemv_hbm_small.json"
step hbm_fused python3 benchmarks/gemv_hbm.py --m 1 2 4 --variant fused --out "$dir/gemv_hbm_fused.json"
finish
