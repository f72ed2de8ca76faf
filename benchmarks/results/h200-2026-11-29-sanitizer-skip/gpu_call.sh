#!/bin/bash
# grader batch with compute-sanitizer tools left out where the check found nothing in an
# exercise's kernels for them (grader.kernel_code), against the code before (f95ea4b,
# unpacked from old-grader.tgz), in turns: new, old, new, old.
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R /tmp/old
{ nproc; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; date -u; } | tee $R/machine.txt
tar xzf old-grader.tgz -C /tmp/old
timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm.log 2>&1; echo prewarm rc=$?
(cd /tmp/old && PYTHONPATH=/tmp/old:$PYTHONPATH timeout 100 python3 -c "from grader.cli import app; app()" check solutions/02_reduction/reduction.ipynb --mode gpu -e reduction.simple > $R/prewarm-old.log 2>&1; echo prewarm old rc=$?)
for round in 1 2; do
  timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/ab/new-$round --copies 24 --buggy 3 --lessons 02_reduction --mode gpu > $R/new-$round.log 2>&1; echo new $round rc=$?
  head -3 /tmp/ab/new-$round/batch_throughput.md
  (cd /tmp/old && PYTHONPATH=/tmp/old:$PYTHONPATH timeout 200 python3 benchmarks/batch_throughput.py --out /tmp/ab/old-$round --copies 24 --buggy 3 --lessons 02_reduction --mode gpu > $R/old-$round.log 2>&1; echo old $round rc=$?)
  head -3 /tmp/ab/old-$round/batch_throughput.md
  tar czf $OUT/ab.tgz -C /tmp ab res --exclude='*.ipynb'
done
