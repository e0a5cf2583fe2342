#!/bin/bash
# The whole GPU test suite in four parallel groups on one GPU, then compute-sanitizer memcheck on the GEMV
# column-group and misaligned-B tests. Usage (on a GPU machine, from the repository root):
#     bash benchmarks/gpu_suite.sh LOG
# LOG gets the header (commit: $TILEDSL_COMMIT where set, for a copy of the tree whose .git is not the tree's; else
# git's HEAD; date, GPU, driver), each group's summary and memcheck's; the full pytest logs go
# beside it as LOG.<group>. Exit status: 0 when every group and memcheck passed.
# The groups: the tensor-core GEMM tests and the other GEMM tests, each split in two halves (alternate test ids),
# and every other GPU test. One GPU runs them together (NVIDIA H200: about 5 minutes with the other GEMM tests in one
# group, which took 6 by 2026-12-03), against about 11 one after another; the tests check results, they time
# nothing, so sharing the GPU changes no outcome.
set -u
log=${1:?usage: bash benchmarks/gpu_suite.sh LOG}
pytest=(python3 -m pytest -q -m gpu -p no:cacheprovider)
pids=()
{
  echo "# python3 -m pytest -m gpu (5 parallel groups, benchmarks/gpu_suite.sh), commit ${TILEDSL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$log"
ids=$(mktemp)
for f in tc:tests/test_gemm_tc_gpu.py gemm:tests/test_gemm_gpu.py; do  # collect both before launching any
  "${pytest[@]}" --collect-only "${f#*:}" 2>/dev/null | grep '::' > "$ids"
  if [ "$(wc -l < "$ids")" -lt 2 ]; then  # bare pytest on an empty half would run the whole suite twice
    echo "collecting ${f#*:} found no GPU tests: see python3 -m pytest -m gpu --collect-only" | tee -a "$log"
    rm -f "$ids"
    exit 1
  fi
  cp "$ids" "$ids.${f%%:*}"
done
for g in tc gemm; do
  mapfile -t half1 < <(awk 'NR % 2 == 1' "$ids.$g")
  mapfile -t half2 < <(awk 'NR % 2 == 0' "$ids.$g")
  "${pytest[@]}" "${half1[@]}" > "$log.${g}1" 2>&1 & pids+=($!)
  "${pytest[@]}" "${half2[@]}" > "$log.${g}2" 2>&1 & pids+=($!)
done
rm -f "$ids" "$ids.tc" "$ids.gemm"
"${pytest[@]}" -rs --ignore tests/test_gemm_tc_gpu.py --ignore tests/test_gemm_gpu.py > "$log.rest" 2>&1 & pids+=($!)
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for g in tc1 tc2 gemm1 gemm2 rest; do
  echo "== $g"
  grep -v '^[.sF]\+ *\[' "$log.$g" | tail -25
done >> "$log"
echo "== compute-sanitizer memcheck: GEMV column groups, misaligned-B default, staged A with slices shorter than its ring (the spare slot's too), twelve rows per block, x @ W.T's ring, the split-K sum as a dependent launch" >> "$log"
# --report-api-errors no: the CUDA Python bindings probe cuGetProcAddress_v2 on each dependent launch (tiledsl/dependent.py)
# and the driver answers CUDA_ERROR_INVALID_VALUE, which memcheck would count as an error (34 on 2026-12-05, every
# launch succeeding); the library checks each launch's status itself, memcheck is here for device memory errors
compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 "${pytest[@]}" tests/test_gemm_gpu.py \
  -k "column_groups or misaligned or (smem_a_against_float64 and (3-7-13 or 5-1000-999)) or (spare_slot_sums and 12-8-13) or (twelve_rows_per_block and 10-7-13) or (column_b_ring and (5-7-130 or 16-33-611 or 4-3-36)) or dependent_launch" \
  > "$log.memcheck" 2>&1 || status=1
tail -4 "$log.memcheck" >> "$log"
echo "exit status $status" >> "$log"
exit $status
