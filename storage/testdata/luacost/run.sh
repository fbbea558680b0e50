#!/bin/bash
# What apply's commands cost, each (BENCHMARKS.md "What a script's Lua
# costs"): a Lua copy of apply.lua's command sequence for 32 one-launch
# groups (apply.lua here, its keys written first by setup.lua), one EVAL a
# variant with one command left out, ROUNDS alternated calls a variant;
# prints each variant's median µs a call and a run (INFO commandstats).
# It FLUSHALLs the server it is given: a redis-server of its own.
#
#   redis-server --port 6390 --save '' --appendonly no --daemonize yes
#   storage/testdata/luacost/run.sh 6390 25
set -eu
port=${1:?usage: run.sh PORT [ROUNDS]}
rounds=${2:-25}
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$dir/apply.lua" "$tmp/all.lua"
grep -v "'ns:run:'" "$dir/apply.lua" > "$tmp/no_run_hset.lua"
sed "s/'dec', 'c-g-10.*'0\\\\31', 'state'/'state'/" "$dir/apply.lua" > "$tmp/no_dec_field.lua"
sed "s/, 'launched_at', '1796345385519', 'started_at', '1796345385519'//; s/, 'policy', 'wait', 'policy_version', '1')/)/" \
  "$dir/apply.lua" > "$tmp/run_hset_3_fields.lua"
grep -v "'HMGET', kg" "$dir/apply.lua" > "$tmp/no_group_hmget.lua"
grep -v "decisions" "$dir/apply.lua" > "$tmp/no_decision_lpush.lua"
grep -v "'HSET', kg," "$dir/apply.lua" > "$tmp/no_group_hset.lua"
cp "$dir/apply_folded.lua" "$tmp/folded.lua"
cli() { redis-cli -p "$port" "$@"; }
for i in $(seq 1 "$rounds"); do
  for v in all no_run_hset no_dec_field run_hset_3_fields no_group_hmget no_decision_lpush no_group_hset folded; do
    cli flushall >/dev/null
    cli eval "$(cat "$dir/setup.lua")" 0 "$([ "$v" = folded ] && echo folded || echo plain)" >/dev/null
    cli config resetstat >/dev/null
    cli eval "$(cat "$tmp/$v.lua")" 0 $(( (i % 9) + 1 )) >/dev/null
    echo "$v $(cli info commandstats | grep -o 'cmdstat_eval:calls=1,usec=[0-9]*' | cut -d= -f3)"
  done
done | python3 -c '
import sys, statistics
d = {}
for l in sys.stdin:
    n, v = l.split()
    d.setdefault(n, []).append(int(v))
for n, vs in d.items():
    m = statistics.median(vs)
    print(f"{n:20s} {m:7.0f} us a call {m/32:5.1f} us a run")'
