# Shared by the GPU "decide" scripts (benchmarks/few_rows_decide.sh, benchmarks/tc_gemv_decide.sh): source it after
# setting `dir` (the output folder), `script` (the caller's path, for the log's header) and `default_steps` (a list);
# then call `step NAME COMMAND...` per step and end with `finish`. DIR gets decide.log (header: script, commit, date,
# GPU, driver; each step's command, its last lines and exit status) and each step's full log as DIR/NAME.log. A failed
# step is reported and the next still runs; `finish` exits 0 when every step did.
mkdir -p "$dir"
log=$dir/decide.log
{
  echo "# $script, commit ${TILEDSL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}, $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$log"
status=0
steps=" ${asked_steps:-$default_steps} "
step() {  # step NAME COMMAND...: run it where NAME is asked for, its output to DIR/NAME.log, its last lines and exit
  local name=$1  # status to decide.log
  shift
  [[ "$steps" == *" $name "* ]] || return 0
  echo "== $name: $*" >> "$log"
  "$@" > "$dir/$name.log" 2>&1
  local rc=$?
  tail -6 "$dir/$name.log" >> "$log"
  echo "exit status $rc" >> "$log"
  [ "$rc" -eq 0 ] || status=1
}
finish() {
  echo "exit status $status" >> "$log"
  exit $status
}
