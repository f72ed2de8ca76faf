#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
R=/tmp/res; mkdir -p $R
{ nproc; lscpu | grep -i "thread\|core\|socket\|model name"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
env | grep -i "^PYTHON"; python3 -c "import sys; print('dont_write_bytecode', sys.flags.dont_write_bytecode, sys.executable, sys.prefix)"
ls /opt/torch/.venv/lib/python3.12/site-packages/numba_cuda/numba/cuda/__pycache__ 2>&1 | head -3
ls -ld /opt/torch/.venv/lib/python3.12/site-packages /tmp/site; ls /tmp/site/numpy/__pycache__ 2>&1 | head -3
} > $R/diag.txt 2>&1
for s in 1 6; do /usr/bin/time -f "alone sleep=$s wall %e user %U sys %S" python3 .whl/ncu_poll.py $s >> $R/ncu_poll.txt 2>&1
/usr/bin/time -f "ncu sleep=$s wall %e user %U sys %S" ncu --profile-from-start off --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -o /tmp/np$s python3 .whl/ncu_poll.py $s > /tmp/ncu$s.log 2>> $R/ncu_poll.txt; tail -2 /tmp/ncu$s.log >> $R/ncu_poll.txt; done
cat $R/ncu_poll.txt
rm -rf /tmp/base; mkdir -p /tmp/base; git archive HEAD | tar -x -C /tmp/base; cp -r .whl /tmp/base/.whl
export PYTHONPATH=$PWD/.whl/probe:/tmp/site
run() { name=$1; dir=$2; shift 2; mkdir -p /tmp/$name $R/tl-$name; (cd $dir && BATCH_PROBE_DIR=$R/tl-$name PYTHONPATH=$PYTHONPATH:$dir timeout 170 env "$@" python3 benchmarks/batch_throughput.py --out /tmp/$name --copies 24 --buggy 3 --lessons 02_reduction > $R/$name.log 2>&1); echo "$name rc=$?"; head -3 /tmp/$name/batch_throughput.md | grep -i "exercises\|CPU" | head -3; cp /tmp/$name/batch_throughput.md $R/$name.md 2>/dev/null; cp /tmp/$name/batch_throughput.json $R/$name.json 2>/dev/null; tar czf $OUT/res.tgz -C /tmp res; }
run base /tmp/base X=1
run wait $PWD X=1
python3 -m compileall -q -j 16 /tmp/site $PWD/grader $PWD/workbook $PWD/benchmarks > /dev/null 2>&1; echo compiled
run waitpyc $PWD X=1
