#!/bin/bash
# ncu's profile process ending through libc's exit(), and staggered first tasks, against the
# grader as it is: lesson 02, one GPU, default workers. Variants are switched by environment.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
D=benchmarks/results/h200-2026-11-29-batch-exit-and-stagger
R=/tmp/res; mkdir -p $R
{ nproc; lscpu | grep -E "^(CPU\(s\)|Thread|Core|Socket|Model name)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } > $R/machine.txt
timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
if [ "${PROBE:-1}" = 1 ]; then
  WORKBOOK_MODE=gpu timeout 120 python3 $D/exit_probe.py ${PROBE_ROUNDS:-3} $R/exit_probe.json > $R/exit_probe.log 2>&1; echo probe rc=$?
  cp $R/exit_probe.json $R/exit_probe.log $OUT/ 2>/dev/null
fi
if [ "${DEMO:-0}" = 1 ]; then
  XP_SANITIZE_EXIT=libc timeout 150 python3 benchmarks/sanitizer_demo.py --json $R/sanitizer_demo_libc.json > $R/sanitizer_demo_libc.log 2>&1; echo "demo rc=$?" | tee -a $R/summary.txt
fi
for run in $RUNS; do
  name=${run%%:*}; envs=${run#*:}
  env ${envs//,/ } timeout 150 python3 benchmarks/batch_throughput.py --out $R/$name --copies 24 --buggy 3 --lessons 02_reduction --mode gpu > $R/$name.log 2>&1
  echo "$name rc=$? $(grep -o '\*\*[0-9.]* exercises/min\*\*' $R/$name/batch_throughput.md)" | tee -a $R/summary.txt
done
cp $R/machine.txt $R/summary.txt $OUT/
tar czf $OUT/runs.tgz -C $R .
