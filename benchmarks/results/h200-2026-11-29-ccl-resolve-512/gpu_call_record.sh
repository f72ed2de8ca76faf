#!/bin/bash
# The second device call: benchmarks/ccl.py and benchmarks/end_to_end.py on the lesson with
# resolve_rank_kernel in 512 x 8.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine-record.txt
timeout 330 python3 benchmarks/ccl.py $OUT/ccl > $OUT/ccl_stdout.log 2>&1; echo "ccl rc=$?"
timeout 200 python3 benchmarks/end_to_end.py --lessons ccl --json $OUT/end_to_end.json \
  > $OUT/end_to_end.log 2>&1; echo "end_to_end rc=$?"
tail -5 $OUT/end_to_end.log
