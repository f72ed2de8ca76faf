#!/bin/bash
# One device call: the init + compress launch on five thread-block shapes beside the lesson's
# (32 x 8), 8192² and 2048², 20 images each on one object per variant (run_times.py).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-tile-shape
R=benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/times.log
specs=""
for s in 32x16 32x4 16x16 64x8 32x32; do specs="$specs t$s=$D/shape_$s.py+$D/tile_shape_var.py"; done
timeout 540 python3 $R $specs 2>&1 | grep -v Warn | tee -a $OUT/times.log
