#!/bin/bash
# Health on the lent H200: one copy of every lesson's solution graded by grader batch in gpu
# mode (all phases, ncu rules included); then the exercise tests in gpu mode, a process per file.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
{ nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine.txt
timeout 330 python3 benchmarks/batch_throughput.py --out /tmp/sol --copies 1 --buggy 0 --mode gpu \
  --lessons 01_ldmatrix 02_reduction 03_softmax 04_layernorm 05_ccl > $OUT/solutions.log 2>&1; echo "solutions rc=$?" | tee -a $OUT/solutions.log
cp /tmp/sol/batch_throughput.md $OUT/solutions.md 2>/dev/null; head -12 /tmp/sol/batch_throughput.md
tar czf $OUT/sol-grades.tgz -C /tmp sol 2>/dev/null
export WORKBOOK_MODE=gpu
for f in reduction ldmatrix softmax layernorm ccl; do
  timeout 220 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs tests/test_${f}_exercises.py > /tmp/t_$f.log 2>&1 &
done
wait; for f in reduction ldmatrix softmax layernorm ccl; do echo "$f: $(tail -1 /tmp/t_$f.log)"; done | tee $OUT/tests.txt
tar czf $OUT/tests.tgz -C /tmp t_reduction.log t_ldmatrix.log t_softmax.log t_layernorm.log t_ccl.log
