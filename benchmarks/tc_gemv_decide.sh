#!/bin/bash
# The GPU run that decides the tensor-core GEMV kernels built without a GPU (precision="3xtf32" and mma="dmma",
# docs/gemm.md: "Few rows on the tensor cores", "Few rows on the FP64 tensor cores"): their GPU tests and memcheck,
# then the sweeps that time them beside schedule=None (the FMA kernels) and cuBLAS. Usage (on a GPU machine, from the
# repository root):
#     bash benchmarks/tc_gemv_decide.sh DIR [STEP ...]
# STEP: any of tests, accumulation, memcheck, dmma_nt, dmma_nn, hbm_dmma, ncu_dmma, mma3x_nt, mma3x_nn, hbm_3xtf32,
# hbm_ieee, ncu, ncu_nn (default: all,
# in that order; a device call of at most 10 minutes takes a few of them: each sweep step about 2-5 minutes, an
# estimate). DIR gets decide.log and each step's JSON and full log (benchmarks/decide_steps.sh). Each sweep checks
# its results against float64 before timing. Run in part on an H100 (2026-12-05, benchmarks/results/tc_gemv_h100_2026-12-05/) and an H200
# (tests, ncu_dmma and the dmma sweeps at 12 and 16 rows: benchmarks/results/tc_gemv_h200_2026-12-05/).
set -u
dir=${1:?usage: bash benchmarks/tc_gemv_decide.sh DIR}
shift
script=benchmarks/tc_gemv_decide.sh default_steps="tests accumulation memcheck dmma_nt dmma_nn hbm_dmma ncu_dmma mma3x_nt mma3x_nn hbm_3xtf32 hbm_ieee ncu ncu_nn" asked_steps="$*"
source "$(dirname "$0")/decide_steps.sh"
pytest=(python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gemm_gpu.py)
step tests "${pytest[@]}" -k "3xtf32 or dmma"
step accumulation python3 benchmarks/tc_accumulation.py --out "$dir/tc_accumulation.json"
step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 "${pytest[@]}" \
  -k "(3xtf32 and 9-132-3000) or (3xtf32 and 16-8-4) or (dmma and 9-132-3000) or (dmma and 16-8-4)"
step dmma_nt python3 benchmarks/gemv_fused.py --family dmma --layouts NT --out "$dir/gemv_dmma_nt.json"
step dmma_nn python3 benchmarks/gemv_fused.py --family dmma --layouts NN --out "$dir/gemv_dmma_nn.json"
step hbm_dmma python3 benchmarks/gemv_hbm.py --m 4 8 12 16 --variant dmma --out "$dir/gemv_hbm_dmma.json"
step mma3x_nt python3 benchmarks/gemv_fused.py --family mma3x --layouts NT --out "$dir/gemv_mma3x_nt.json"
step mma3x_nn python3 benchmarks/gemv_fused.py --family mma3x --layouts NN --out "$dir/gemv_mma3x_nn.json"
step hbm_3xtf32 python3 benchmarks/gemv_hbm.py --m 8 12 16 --precision 3xtf32 --out "$dir/gemv_hbm_3xtf32.json"
step hbm_ieee python3 benchmarks/gemv_hbm.py --m 4 8 12 16 --out "$dir/gemv_hbm_ieee.json"
ncu=(ncu --clock-control none --profile-from-start off -k regex:tiledsl_gemv --section SpeedOfLight --section Occupancy
     --section SchedulerStats --section WarpStateStats)
step ncu_dmma "${ncu[@]}" --section ComputeWorkloadAnalysis python3 benchmarks/ncu_gemv.py 16 22016 4096 NT --variant dmma
step ncu "${ncu[@]}" python3 benchmarks/ncu_gemv.py 16 22016 4096 NT --precision 3xtf32
step ncu_nn "${ncu[@]}" python3 benchmarks/ncu_gemv.py 16 22016 4096 NN --precision 3xtf32
finish
