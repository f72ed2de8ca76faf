#!/bin/bash
source .whl/use-wheels.sh; export PYTHONPATH=$PWD:$PYTHONPATH
export WORKBOOK_MODE=gpu
ncu --set full --kernel-name regex:"blob_stats_packed|block_write_kernel|resolve_rank|block_merge" --export $OUT/stats --force-overwrite python3 .whl/stats_prof.py > $OUT/ncu_run.log 2>&1
tail -5 $OUT/ncu_run.log
ncu --import $OUT/stats.ncu-rep --page details > $OUT/stats_details.txt 2>&1
ncu --import $OUT/stats.ncu-rep --page raw --csv --metrics launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed > $OUT/stats_raw.csv 2>&1
rm -f $OUT/stats.ncu-rep.tmp
ls -la $OUT; grep -E "^  [a-z_]+kernel|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Achieved Occupancy|Theoretical Occ" $OUT/stats_details.txt | head -120
