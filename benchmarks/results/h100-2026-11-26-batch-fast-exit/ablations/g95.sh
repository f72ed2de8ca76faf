#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run() { name=$1; shift; mkdir -p /tmp/$name; timeout 150 python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction "$@" > $OUT/$name.log 2>&1; echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $OUT/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $OUT/$name.json 2>/dev/null; }
run default
run no-sanitizers --no-sanitizers
run no-metrics --no-metrics
