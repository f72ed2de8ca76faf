#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
SCRIPT=$PWD/.whl/locktest.py; cd /tmp
run() { # mode separate_tmp
  local mode=$1 sep=$2; local s=$(date +%s.%N)
  for i in 1 2 3 4; do
    if [ "$sep" = 1 ]; then mkdir -p /tmp/lk$i; T=/tmp/lk$i; else T=/tmp; fi
    TMPDIR=$T ncu --profile-from-start off --metrics gpu__time_duration.sum -f -o /tmp/rep_${mode}_${sep}_$i python3 $SCRIPT $mode > /tmp/log_${mode}_${sep}_$i 2>&1 &
  done; wait
  local e=$(date +%s.%N)
  echo "$mode sep=$sep: 4 copies in $(python3 -c "print(round($e-$s,2))") s; "
  for i in 1 2 3 4; do grep -c "PROF== Profiling" /tmp/log_${mode}_${sep}_$i | tr "\n" " "; done; echo; grep -h "start" /tmp/log_${mode}_${sep}_* | sort -k3
}
s=$(date +%s.%N); TMPDIR=/tmp ncu --profile-from-start off --metrics gpu__time_duration.sum -f -o /tmp/rep_single python3 $SCRIPT none >/dev/null 2>&1; echo "single none: $(python3 -c "print(round($(date +%s.%N)-$s,2))") s"
for m in before after_ctx inside end; do run $m 0; done
run after_ctx 1
run inside 1
ls -la /tmp/lk1 /tmp | grep -i lock
cat /tmp/log_inside_1_1 | tail -5
