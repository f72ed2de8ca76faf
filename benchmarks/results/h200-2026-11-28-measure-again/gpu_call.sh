#!/bin/bash
# A failed metric rule measured again, on a GPU: lesson 02's slow-but-correct convergent and
# shared reduces planted in the solution notebook, graded by grader check in gpu mode (both
# must still fail their rules, each result noting the second measurement); the clean solution
# for the same two exercises (must pass, with no second run).
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
D=benchmarks/results/h200-2026-11-28-measure-again
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee $OUT/machine.txt
python3 $D/plant_slow.py /tmp/slow.ipynb reduction.convergent reduction.shared
G="python3 -c 'from grader.cli import app; app()'"
timeout 200 bash -c "$G check /tmp/slow.ipynb --mode gpu -e reduction.convergent -e reduction.shared --json $OUT/slow.json" > $OUT/slow.log 2>&1; echo "slow rc=$?" | tee -a $OUT/slow.log
timeout 150 bash -c "$G check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.convergent -e reduction.shared --json $OUT/clean.json" > $OUT/clean.log 2>&1; echo "clean rc=$?" | tee -a $OUT/clean.log
grep -h "measured again\|rule .*: failed\|rule .*: passed" $OUT/slow.log $OUT/clean.log | cut -c1-220
