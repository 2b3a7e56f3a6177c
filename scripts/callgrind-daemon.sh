#!/bin/sh
# The release daemon under callgrind with instrumentation off until asked for, as a `--daemon`
# for `node-lifecycled-sim bench`: the sync runs at near full speed, and a steady window is
# profiled alone (BENCHMARKS.md, "Where a Lease event's cost goes"):
#
#   NLD_BIN=target/release/node-lifecycled CALLGRIND_DIR=/tmp/cg \
#     target/release/node-lifecycled-sim bench --nodes 2000 --quick \
#     --daemon scripts/callgrind-daemon.sh --dir /tmp/cg/bench &
#   # once the bench prints "sync: READY=1", with PID the daemon's pid it printed:
#   callgrind_control -i on PID; sleep 40; callgrind_control -d steady PID; callgrind_control -i off PID
#   callgrind_annotate --inclusive=yes --tree=calling /tmp/cg/callgrind.out.PID.1
dir=${CALLGRIND_DIR:-/tmp}
exec valgrind --tool=callgrind --instr-atstart=no --dump-instr=no \
  --callgrind-out-file="$dir/callgrind.out.%p" \
  "${NLD_BIN:-target/release/node-lifecycled}" "$@"
