# shellcheck shell=bash
# Dated bench records (sourced by the bench scripts, not run).
#
# Each bench writes into its own folder, bench/results/<bench>/:
#   YYYY-MM-DD-<commit>-<what>.jsonl   one JSON object per measurement, each
#                                      carrying the run's header: commit,
#                                      date, machine (nproc, load) and args
#   latest.md                          the table of the newest run
# bench/lib/record.py does the same for the Python benches.
#
#   record_open BENCH WHAT ARG...   sets record_dir, record (the .jsonl path)
#                                   and record_header (JSON); ARG... are the
#                                   bench's own arguments, as given; with
#                                   record_keep=1 an existing record of the
#                                   same name is kept (a resumed run)
#   record_add JSON                 appends the header merged with JSON
#   record_tee                      from here on, the script's stdout also
#                                   goes to latest.md (the benches that print
#                                   their table)
# ROWAN_BENCH_RESULTS overrides bench/results (e.g. for a scratch run).

record_open() {
  local bench=$1 what=$2
  shift 2
  local root commit args=[]
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  (($# == 0)) || args=$(printf '%s\n' "$@" | jq -R . | jq -cs .)
  commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
  record_dir=${ROWAN_BENCH_RESULTS:-$root/bench/results}/$bench
  mkdir -p "$record_dir"
  record=$record_dir/$(date -u +%F)-$commit-$what.jsonl
  record_header=$(jq -cn --arg commit "$commit" --arg date "$(date -u +%FT%TZ)" \
    --argjson nproc "$(nproc)" --argjson load "$(cut -d' ' -f1 /proc/loadavg)" \
    --arg bench "$bench" --argjson args "$args" '{bench: $bench, commit: $commit, date: $date,
      machine: {nproc: $nproc, load: $load}, args: $args}')
  [[ ${record_keep:-0} == 1 && -f $record ]] || : >"$record"
}

record_add() {
  jq -c --argjson h "$record_header" '$h + .' <<<"$1" >>"$record"
}

record_tee() {
  exec > >(tee "$record_dir/latest.md")
}
