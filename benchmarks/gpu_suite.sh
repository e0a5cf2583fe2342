#!/bin/bash
# The whole GPU test suite in four parallel groups on one GPU, then compute-sanitizer memcheck on the GEMV
# column-group and misaligned-B tests. Usage (on a GPU machine, from the repository root):
#     bash benchmarks/gpu_suite.sh LOG
# LOG gets the header (commit, date, GPU, driver), each group's summary and memcheck's; the full pytest logs go
# beside it as LOG.<group>. Exit status: 0 when every group and memcheck passed.
# The groups: the tensor-core GEMM tests split in two halves (alternate test ids), the other GEMM tests, and every
# other GPU test. One GPU runs them together in about 5 minutes (NVIDIA H200), against about 11 one after another;
# the tests check results, they time nothing, so sharing the GPU changes no outcome.
set -u
log=${1:?usage: bash benchmarks/gpu_suite.sh LOG}
pytest=(python3 -m pytest -q -m gpu -p no:cacheprovider)
{
  echo "# python3 -m pytest -m gpu (4 parallel groups, benchmarks/gpu_suite.sh), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$log"
ids=$(mktemp)
"${pytest[@]}" --collect-only tests/test_gemm_tc_gpu.py 2>/dev/null | grep '::' > "$ids"
mapfile -t tc1 < <(awk 'NR % 2 == 1' "$ids")
mapfile -t tc2 < <(awk 'NR % 2 == 0' "$ids")
rm -f "$ids"
if [ "${#tc1[@]}" -eq 0 ] || [ "${#tc2[@]}" -eq 0 ]; then  # bare pytest would run the whole suite twice
  echo "collecting tests/test_gemm_tc_gpu.py found no GPU tests: see python3 -m pytest -m gpu --collect-only" | tee -a "$log"
  exit 1
fi
"${pytest[@]}" "${tc1[@]}" > "$log.tc1" 2>&1 & p1=$!
"${pytest[@]}" "${tc2[@]}" > "$log.tc2" 2>&1 & p2=$!
"${pytest[@]}" tests/test_gemm_gpu.py > "$log.gemm" 2>&1 & p3=$!
"${pytest[@]}" -rs --ignore tests/test_gemm_tc_gpu.py --ignore tests/test_gemm_gpu.py > "$log.rest" 2>&1 & p4=$!
status=0
for p in $p1 $p2 $p3 $p4; do wait "$p" || status=1; done
for g in tc1 tc2 gemm rest; do
  echo "== $g"
  grep -v '^[.sF]\+ *\[' "$log.$g" | tail -25
done >> "$log"
echo "== compute-sanitizer memcheck: GEMV column groups, misaligned-B default" >> "$log"
compute-sanitizer --tool memcheck --error-exitcode 1 "${pytest[@]}" tests/test_gemm_gpu.py -k "column_groups or misaligned" \
  > "$log.memcheck" 2>&1 || status=1
tail -4 "$log.memcheck" >> "$log"
echo "exit status $status" >> "$log"
exit $status
