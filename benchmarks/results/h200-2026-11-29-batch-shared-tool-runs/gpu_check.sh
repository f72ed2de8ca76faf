#!/bin/bash
# The grader as committed (56c25b8): the GPU tests of the modules the change touched, then a
# batch of lessons 01 and 05 with tasks of several notebooks (3 workers for 12 notebooks),
# each task's tools over notebooks of both lessons, every verdict and metric rule checked.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/chk; rm -rf $R; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $R/machine.txt
WORKBOOK_MODE=gpu timeout 130 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs -m gpu \
  tests/test_batch.py tests/test_kernel_cache.py tests/test_kernel_code.py > $R/gpu_tests.log 2>&1
echo "tests rc=$? $(tail -1 $R/gpu_tests.log)" | tee -a $R/summary.txt; cp $R/summary.txt $R/gpu_tests.log $OUT/
timeout 260 python3 benchmarks/batch_throughput.py --out $R/lessons-01-05 --copies 6 --buggy 2 --workers 3 --lessons 01_ldmatrix 05_ccl --mode gpu > $R/lessons.log 2>&1
echo "lessons 01+05 rc=$? $(grep -o '\*\*[0-9.]* exercises/min\*\*' $R/lessons-01-05/batch_throughput.md) $(grep -c WRONG $R/lessons-01-05/batch_throughput.md) wrong" | tee -a $R/summary.txt
cp $R/summary.txt $R/machine.txt $R/lessons-01-05/batch_throughput.md $OUT/ 2>/dev/null
tar czf $OUT/check.tgz -C $R --exclude=grades . ; tar czf $OUT/grades.tgz -C $R/lessons-01-05 grades 2>/dev/null
tail -5 $R/lessons.log
