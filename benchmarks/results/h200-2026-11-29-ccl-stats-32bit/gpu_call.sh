#!/bin/bash
# One device call after the packed statistics took 32-bit words (four native shared-memory
# atomics per run instead of two 64-bit ones, which compile to compare-and-swap loops): the
# fused pipeline's tests in gpu mode beside the solution through grader batch; then the
# lesson against its old 64-bit table (packed64_var.py) on 20 images per size; then the
# benchmark's record and the end-to-end calls.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-stats-32bit
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine.txt
timeout 200 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs tests/test_ccl_fused.py \
  > $OUT/gpu_tests_fused.log 2>&1 &
timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/sol --copies 1 --buggy 0 --mode gpu \
  --lessons 05_ccl > $OUT/solution.log 2>&1; echo "solution rc=$?" >> $OUT/solution.log
cp /tmp/sol/batch_throughput.md $OUT/solution.md 2>/dev/null
wait; tail -2 $OUT/gpu_tests_fused.log; head -1 $OUT/solution.md; grep "| student" $OUT/solution.md
timeout 150 python3 benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py \
  packed64=$D/packed64_var.py 2>&1 | grep -v Warn > $OUT/times.log; tail -1 $OUT/times.log
timeout 170 python3 benchmarks/ccl.py $OUT/ccl > $OUT/ccl_stdout.log 2>&1; echo "ccl rc=$?"
timeout 90 python3 benchmarks/end_to_end.py --lessons ccl --json $OUT/end_to_end.json \
  > $OUT/end_to_end.log 2>&1; echo "end_to_end rc=$?"
