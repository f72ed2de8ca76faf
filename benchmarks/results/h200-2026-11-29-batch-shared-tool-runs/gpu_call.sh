#!/bin/bash
# One process per compute-sanitizer tool and one simulator pass for a task's notebooks (the
# tree of this folder's README) against the grader before it: 700c75b's grader, workbook,
# solutions, lessons and benchmark scripts as xp_base/ (with this tree's batch_throughput.py,
# whose verdicts also check that metric rules were measured), run from there with only the
# wheels on PYTHONPATH; in turns. (First call: the GPU tests of the grading phases.)
source .whl/use-wheels.sh; WHEELS=$PYTHONPATH; export PYTHONPATH=$PWD:$PYTHONPATH
ROOT=$PWD
R=/tmp/res; rm -rf $R; mkdir -p $R
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $R/machine.txt
(cd $ROOT/xp_base && PYTHONPATH=$WHEELS python3 -c "import grader.runner as r, grader.grade as g; print('base:', r.__file__, hasattr(g, 'prepare'))") >> $R/machine.txt
python3 -c "import grader.runner as r, grader.grade as g; print('shared:', r.__file__, hasattr(g, 'prepare'))" >> $R/machine.txt
cat $R/machine.txt
[ -n "$GPU_TESTS" ] && { WORKBOOK_MODE=gpu timeout 150 python3 -m pytest -o addopts="" -p no:cacheprovider -q -rs -m gpu \
  tests/test_grading_phases.py > $R/gpu_tests.log 2>&1; echo "tests rc=$? $(tail -1 $R/gpu_tests.log)" | tee -a $R/summary.txt; cp $R/gpu_tests.log $OUT/; }
for name in base shared base2 shared2; do
  case $name in
    base*) (cd $ROOT/xp_base && PYTHONPATH=$WHEELS timeout 150 python3 benchmarks/batch_throughput.py --out $R/$name --copies 24 --buggy 3 --lessons 02_reduction --mode gpu > $R/$name.log 2>&1) ;;
    *) timeout 150 python3 benchmarks/batch_throughput.py --out $R/$name --copies 24 --buggy 3 --lessons 02_reduction --mode gpu > $R/$name.log 2>&1 ;;
  esac
  echo "$name rc=$? $(grep -o '\*\*[0-9.]* exercises/min\*\*' $R/$name/batch_throughput.md) $(grep -c WRONG $R/$name/batch_throughput.md) wrong" | tee -a $R/summary.txt
  cp $R/summary.txt $OUT/
done
cp $R/machine.txt $OUT/
tar czf $OUT/runs.tgz -C $R .
