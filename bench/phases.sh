# bench/phases.sh - the phase log the bench scripts share (sourced; bench/llama1b3.sh, bench/soak.sh).
#
# phase_start NAME prints a header with the seconds since PHASES_BEGIN; phase_end STATUS
# [DETAIL] prints and keeps a row (name padded to PHASE_WIDTH, default 12) in `phases`,
# and sets failed=1 on FAIL. `since T` is the seconds from epoch time T to now.
failed=0
phases=()
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
PHASES_BEGIN=${PHASES_BEGIN:-$(now)}
phase_start() { echo; echo "== $1 ($(since "$PHASES_BEGIN") s since the start)"; phase_t=$(now); phase_name=$1; }
phase_end() {  # status [detail]
  local line
  line=$(printf "%-${PHASE_WIDTH:-12}s %-5s %6s s  %s" "$phase_name" "$1" "$(since "$phase_t")" "${2:-}")
  phases+=("$line")
  echo "-- $line"
  [[ $1 == FAIL ]] && failed=1
  return 0
}
