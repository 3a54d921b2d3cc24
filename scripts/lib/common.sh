# shellcheck shell=bash
# Helpers the rowan scripts share (sourced, not run).
#
#   die MESSAGE...    "<prog>: MESSAGE" on stderr, then exit $die_status (default 1)
#   note MESSAGE...   "<prog>: MESSAGE" on stderr
#   usage [MESSAGE]   MESSAGE (if any), then the script's synopsis on stderr:
#                     its opening comment from line 2 to line $usage_last
#                     (default: the whole comment, up to the first line that
#                     is not one) without the "# "; then exit $usage_status
#                     (default 64, EX_USAGE)
#
# A script may set prog (the name in messages, default its file name),
# die_status, usage_last and usage_status before or after sourcing this.

prog=${prog:-$(basename "$0")}

die() {
  echo "$prog: $*" >&2
  exit "${die_status:-1}"
}

note() { echo "$prog: $*" >&2; }

usage() {
  [[ $# -eq 0 ]] || echo "$prog: $*" >&2
  if [[ -n ${usage_last:-} ]]; then
    sed -n "2,${usage_last}p" "$0"
  else
    sed -n '2,/^[^#]/p' "$0" | sed '$d'
  fi | sed 's/^# \{0,1\}//; s/^#$//' >&2
  exit "${usage_status:-64}"
}
