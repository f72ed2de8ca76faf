#!/bin/bash
# One device call after resolve_rank_kernel took its own shape (512 threads x 8 cells): the
# fused pipeline's tests in gpu mode and the lesson's solution through grader batch (every
# phase) side by side; then, on one set of images, the lesson against resolve_rank_kernel
# in the scan's old shape (1024 x 4, scan_shape_var.py) and against the init compiled with
# fewer registers (../h200-2026-11-29-ccl-init-registers/).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-resolve-512
I=benchmarks/results/h200-2026-11-29-ccl-init-registers
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine.txt
timeout 280 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs tests/test_ccl_fused.py \
  > $OUT/gpu_tests_fused.log 2>&1 &
timeout 280 python3 benchmarks/batch_throughput.py --out /tmp/sol --copies 1 --buggy 0 --mode gpu \
  --lessons 05_ccl > $OUT/solution.log 2>&1; echo "solution rc=$?" >> $OUT/solution.log
cp /tmp/sol/batch_throughput.md $OUT/solution.md 2>/dev/null
wait; tail -3 $OUT/gpu_tests_fused.log; head -3 $OUT/solution.md
timeout 300 python3 benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py \
  scan1024x4=$D/scan_shape_var.py regs32=$I/regs32.py+$I/init_jit_var.py \
  bounds256x8=$I/bounds256x8.py+$I/init_jit_var.py 2>&1 | grep -v Warn > $OUT/times.log
tail -2 $OUT/times.log
