#!/usr/bin/env bash
# The cost of a release-window decision: `promote --explain` (the gate now,
# the next open and close, the 14-day calendar) against a loopback CNCF
# distribution registry holding one candidate, for policies whose schedule
# ranges from office hours to the worst there is: a window opening every
# minute and lasting days (each minute's opening overlaps the next 43,199
# at 30 days). Reported per policy: wall and CPU seconds (user + sys) of
# one run, the median of RUNS runs (default 3), and the decision's `open`
# and first calendar period, checked equal across the binaries compared.
# The office-hours policy is the peer: a decision should cost the same
# whatever the schedule.
#
# Usage: scripts/bench-windows.sh [BINARY...]
#   (default: target/release/settings-image; compare two builds by passing
#   both). A run longer than LIMIT seconds (default 600) is stopped and
#   reported as such. POLICIES picks some of: office-hours every-minute-1h
#   every-minute-8h every-minute-1d every-minute-30d every-minute-366d
#   never-366d (default: all; the shorter every-minute ones show how the
#   cost grew with the duration before).
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -eq 0 ] && bins=(target/release/settings-image)
runs="${RUNS:-3}"
limit="${LIMIT:-600}"
. scripts/bench-lib.sh bench-windows
bench_need docker-registry python3 /usr/bin/time timeout

bench_work
port="$(free_port)"
bench_registry "127.0.0.1:$port"
repo="127.0.0.1:$port/team/settings"
mkdir -p "$work/shop" && echo "port: 8080" > "$work/shop/app.yaml"
"${bins[0]}" push --path "$work/shop" --repository "$repo" --tag main-1700000000-abcdef0 \
  --no-provenance > /dev/null 2> "$work/push.err"

policy() { # NAME SCHEDULE DURATION
  printf 'windows:\n  - kind: allow\n    description: %s\n    schedule: "%s"\n    duration: %s\n    timeZone: Europe/Amsterdam\n' \
    "$1" "$2" "$3" > "$work/$1.yaml"
}
policy office-hours "0 9 * * 1-5" 8h
policy every-minute-1h "* * * * *" 1h
policy every-minute-8h "* * * * *" 8h
policy every-minute-1d "* * * * *" 1d
policy every-minute-30d "* * * * *" 30d
policy every-minute-366d "* * * * *" 366d
policy never-366d "0 0 30 2 *" 366d

printf '%-20s %-44s %9s %9s  %s\n' POLICY BINARY WALL_S CPU_S DECISION
for p in ${POLICIES:-office-hours every-minute-1h every-minute-8h every-minute-1d every-minute-30d every-minute-366d never-366d}; do
  want=""
  for bin in "${bins[@]}"; do
    walls=() cpus=() answer="" stopped=""
    for _ in $(seq "$runs"); do
      if /usr/bin/time -f '%e %U %S' -o "$work/time" timeout "$limit" \
          "$bin" promote --repository "$repo" --from main --to prod --explain --json \
          --policy "$work/$p.yaml" --at 2026-12-01T10:00:30Z > "$work/out" 2> "$work/err"; then
        read -r wall user sys < "$work/time"
        walls+=("$wall")
        cpus+=("$(python3 -c "print(round($user + $sys, 2))")")
        answer=$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); c=o["calendar"][0]; print(o["gate"]["open"], c["open"], c["end"])' "$work/out")
      else
        rc=$?
        if [ "$rc" -eq 124 ]; then stopped="stopped after ${limit} s"; break; fi
        echo "bench-windows: $bin failed on $p (exit $rc): $(head -c 300 "$work/err")" >&2
        exit 1
      fi
    done
    if [ -n "$stopped" ]; then
      printf '%-20s %-44s %9s %9s  %s\n' "$p" "$bin" ">$limit" "-" "$stopped"
      continue
    fi
    med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    printf '%-20s %-44s %9s %9s  %s\n' "$p" "$bin" "$(med "${walls[@]}")" "$(med "${cpus[@]}")" "$answer"
    if [ -z "$want" ]; then
      want="$answer"
    elif [ "$want" != "$answer" ]; then
      echo "bench-windows: the binaries disagree on $p: $want vs $answer" >&2
      exit 1
    fi
  done
done
