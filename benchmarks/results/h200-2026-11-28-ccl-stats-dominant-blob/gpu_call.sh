#!/bin/bash
# One device call (about 5 min): both untimed lesson-05 variants of 2026-11-28 checked on a
# GPU, then timed beside the lesson's code, alone and together (st_run.py: statistics,
# label and run, median of 10 between CUDA events; 8192² and 2048²).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-28-ccl-stats-dominant-blob/dominant_blob_var.py
R=benchmarks/results/h200-2026-11-28-ccl-reset-ahead/reset_ahead_var.py
CHECK=benchmarks/results/h200-2026-11-28-ccl-reset-ahead/sequence_check.py
RUNNER=benchmarks/results/h100-2026-11-26-ccl-stats-registers/variants/st_run.py
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/v.log
for v in $D $R; do timeout 120 python3 $CHECK $v 2>&1 | grep -v Warn | tee -a $OUT/v.log; done
CASES=0.3/4,0.5/4,0.59/4,0.1/4,0.5/8,0.9/8 timeout 420 python3 $RUNNER dom=$D ra=$R both=$D+$R 2>&1 \
  | grep -v Warn | tee -a $OUT/v.log
