#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
SCRIPT=$PWD/.whl/locktest2.py; cd /tmp
M="gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,smsp__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__sass_inst_executed_op_global_ld.sum"
run() { # name end extra-ncu-args
  local name=$1 end=$2; shift 2; local s=$(date +%s.%N)
  for i in 1 2 3 4; do
    ncu --profile-from-start off --metrics $M "$@" -f -o /tmp/r_${name}_$i python3 $SCRIPT $end > /tmp/l_${name}_$i 2>&1 &
  done; wait
  local e=$(date +%s.%N)
  echo "$name: 4 copies in $(python3 -c "print(round($e-$s,2))") s; profiled: $(for i in 1 2 3 4; do grep -c "PROF== Profiling" /tmp/l_${name}_$i | tr '\n' ' '; done) errors: $(cat /tmp/l_${name}_* | grep -c -i error)"
  grep -h -i "error" /tmp/l_${name}_* | head -3
}
s=$(date +%s.%N); ncu --profile-from-start off --metrics $M -f -o /tmp/r_single python3 $SCRIPT normal > /tmp/l_single 2>&1; echo "single: $(python3 -c "print(round($(date +%s.%N)-$s,2))") s"
run normal normal
run exit_ exit_
run normal2 normal
run close_exit close_exit_
run normal3 normal
run clock_none normal --clock-control none
run cache_none normal --cache-control none
run app_only normal --target-processes application-only
run all3 close_exit_ --clock-control none --cache-control none --target-processes application-only
run normal4 normal
