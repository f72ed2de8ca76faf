#!/bin/bash
# The lesson's recorded run after the 32-bit statistics table: benchmarks/ccl.py --record and
# benchmarks/end_to_end.py --lessons ccl (both merge their parts into
# workbook/data/05_ccl.json, which comes back with their own outputs).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine.txt
timeout 200 python3 benchmarks/ccl.py /tmp/ccl --record > /dev/null 2>&1; echo "ccl rc=$?"
cp /tmp/ccl/ccl.json /tmp/ccl/ccl.md /tmp/ccl/ccl.log $OUT/
timeout 100 python3 benchmarks/end_to_end.py --lessons ccl --json $OUT/end_to_end.json \
  > $OUT/end_to_end.log 2>&1; echo "end_to_end rc=$?"
cp workbook/data/05_ccl.json $OUT/
grep -A12 "x cupyx wall" /tmp/ccl/ccl.md | grep blocks | grep 8192 | cut -d'|' -f2,3,9,10,11,14
