#!/bin/bash
# One device call: resolve_rank_kernel in three other (threads, cells per thread) shapes
# beside the lesson's (1024, 4), 8192² and 2048², 20 images each (run_times.py).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-resolve-shape
R=benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/times.log
echo "RESOLVE_SHAPE = (512, 8)" > /tmp/r512.py
echo "RESOLVE_SHAPE = (256, 16)" > /tmp/r256.py
echo "RESOLVE_SHAPE = (128, 32)" > /tmp/r128.py
timeout 540 python3 $R r512x8=/tmp/r512.py+$D/resolve_shape_var.py \
  r256x16=/tmp/r256.py+$D/resolve_shape_var.py r128x32=/tmp/r128.py+$D/resolve_shape_var.py \
  2>&1 | grep -v Warn | tee -a $OUT/times.log
