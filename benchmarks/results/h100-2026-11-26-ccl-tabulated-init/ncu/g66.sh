#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
TIMING=1 python3 .whl/init_prof.py 2>&1 | grep -v Warn | tee $OUT/init_prof.log
ncu --set full --kernel-name regex:"block_init" --launch-count 4 --export $OUT/init --force-overwrite python3 .whl/init_prof.py > $OUT/ncu_run.log 2>&1
tail -3 $OUT/ncu_run.log
ncu --import $OUT/init.ncu-rep --page details > $OUT/init_details.txt 2>&1
ncu --import $OUT/init.ncu-rep --page raw --csv --metrics launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio,gpu__time_duration.sum,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active > $OUT/init_raw.csv 2>&1
ls -la $OUT
