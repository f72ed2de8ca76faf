#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { name=$1; shift; mkdir -p /tmp/$name; timeout 170 env "$@" python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction > $OUT/$name.log 2>&1; echo "$name rc=$?"; head -12 /tmp/$name/batch_throughput.md | grep -i "exercises\|min\|workers" | head -4; cp /tmp/$name/batch_throughput.md $OUT/$name.md 2>/dev/null; }
run base PROBE_PIN_CORES=0
run pin2 PYTHONPATH=$PWD/.whl/pin_site:$PYTHONPATH PROBE_PIN_CORES=2
run pin3 PYTHONPATH=$PWD/.whl/pin_site:$PYTHONPATH PROBE_PIN_CORES=3
