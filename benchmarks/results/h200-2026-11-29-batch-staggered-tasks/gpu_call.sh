#!/bin/bash
# The committed C exit (65cd14b): the GPU tests of the grading phases, then the default batch
# against staggered first tasks (XP_STAGGER=2: ../h200-2026-11-29-batch-process-exit/switches.diff, its grader/batch.py part, applied on 65cd14b), in turns.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res3; rm -rf $R; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $R/machine.txt
WORKBOOK_MODE=gpu timeout 170 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs -m gpu \
  tests/test_grading_phases.py > $R/gpu_tests.log 2>&1; echo "tests rc=$? $(tail -1 $R/gpu_tests.log)" | tee -a $R/summary.txt
cp $R/gpu_tests.log $R/summary.txt $OUT/
for run in default:XP_NONE=1 stagger2:XP_STAGGER=2 default2:XP_NONE=1 stagger2b:XP_STAGGER=2; do
  name=${run%%:*}; envs=${run#*:}
  env ${envs//,/ } timeout 150 python3 benchmarks/batch_throughput.py --out $R/$name --copies 24 --buggy 3 --lessons 02_reduction --mode gpu > $R/$name.log 2>&1
  echo "$name rc=$? $(grep -o '\*\*[0-9.]* exercises/min\*\*' $R/$name/batch_throughput.md)" | tee -a $R/summary.txt
  cp $R/summary.txt $OUT/
done
cp $R/machine.txt $OUT/
tar czf $OUT/runs.tgz -C $R .
