#!/bin/bash
# A subset of the GPU tests in three parallel shards on one GPU, for a device call too short for the whole suite
# (benchmarks/gpu_suite.sh). Usage (on a GPU machine, from the repository root):
#     bash benchmarks/gpu_tests_subset.sh LOG FILE EXPR
# runs python3 -m pytest -m gpu FILE -k EXPR; LOG gets the header (commit: $TILEDSL_COMMIT where set; date, GPU) and
# each shard's summary, the full logs beside it as LOG.1, LOG.2, LOG.3. Exit status: 0 when every shard passed.
set -u
log=${1:?usage: bash benchmarks/gpu_tests_subset.sh LOG FILE EXPR} file=${2:?FILE} expr=${3:?EXPR}
pytest=(python3 -m pytest -q -m gpu -p no:cacheprovider)
{
  echo "# python3 -m pytest -m gpu $file -k \"$expr\" (3 parallel shards, benchmarks/gpu_tests_subset.sh), commit ${TILEDSL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$log"
mapfile -t ids < <("${pytest[@]}" --collect-only "$file" -k "$expr" 2>/dev/null | grep '::')
echo "${#ids[@]} tests" >> "$log"
[ "${#ids[@]}" -ge 3 ] || { echo "fewer than 3 tests collected" >> "$log"; exit 1; }
pids=()
for s in 0 1 2; do
  shard=()
  for i in "${!ids[@]}"; do [ $((i % 3)) -eq "$s" ] && shard+=("${ids[$i]}"); done
  "${pytest[@]}" "${shard[@]}" > "$log.$((s + 1))" 2>&1 & pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
for s in 1 2 3; do echo "== shard $s"; grep -v '^[.sF]\+ *\[' "$log.$s" | tail -15; done >> "$log"
echo "exit status $status" >> "$log"
exit $status
