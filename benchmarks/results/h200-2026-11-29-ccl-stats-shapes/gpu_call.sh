#!/bin/bash
# One device call: the packed statistics forced to each of their three thread shapes beside
# the lesson's choice (packed_stats_for), 8192² and 2048², 20 images each (run_times.py).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-stats-shapes
R=benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/times.log
for p in 4 8 16; do echo "PIXELS_FORCED = $p" > /tmp/px$p.py; done
timeout 540 python3 $R px4=/tmp/px4.py+$D/forced_shape_var.py px8=/tmp/px8.py+$D/forced_shape_var.py \
  px16=/tmp/px16.py+$D/forced_shape_var.py 2>&1 | grep -v Warn | tee -a $OUT/times.log
