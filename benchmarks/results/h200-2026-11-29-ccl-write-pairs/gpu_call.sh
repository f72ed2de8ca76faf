#!/bin/bash
# One device call after the write's labels went out as 64-bit pairs (store2_int32): the
# fused pipeline's tests and store2_int32's in gpu mode beside the solution through grader
# batch; the lesson against the old scalar write (scalar_write_var.py); then the lesson's
# record (benchmarks/ccl.py --record, benchmarks/end_to_end.py). A call returns at most 8
# files: the scripts' logs stay behind, their tables come back.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
D=benchmarks/results/h200-2026-11-29-ccl-write-pairs
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine.txt
timeout 200 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs tests/test_ccl_fused.py \
  tests/test_workbook_runtime.py > $OUT/gpu_tests.log 2>&1 &
timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/sol --copies 1 --buggy 0 --mode gpu \
  --lessons 05_ccl > /tmp/solution.log 2>&1; echo "solution rc=$?" >> /tmp/solution.log
cp /tmp/sol/batch_throughput.md $OUT/solution.md 2>/dev/null
wait; tail -2 $OUT/gpu_tests.log; head -1 $OUT/solution.md; grep "| student" $OUT/solution.md
timeout 150 python3 benchmarks/results/h200-2026-11-28-ccl-readback-last/run_times.py \
  scalar_write=$D/scalar_write_var.py 2>&1 | grep -v Warn > $OUT/times.log; tail -1 $OUT/times.log
timeout 170 python3 benchmarks/ccl.py /tmp/ccl --record > /dev/null 2>&1; echo "ccl rc=$?"
cp /tmp/ccl/ccl.md /tmp/ccl/ccl.json $OUT/
timeout 90 python3 benchmarks/end_to_end.py --lessons ccl --json $OUT/end_to_end.json \
  > /tmp/end_to_end.log 2>&1; echo "end_to_end rc=$?"; grep "ccl p=" /tmp/end_to_end.log | grep -v pixels
cp workbook/data/05_ccl.json $OUT/
