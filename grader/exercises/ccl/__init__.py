"""Lesson 05 (connected-component labelling): the exercises, each declared once.

Labels are compared with ``scipy.ndimage.label``. Until the compaction exercise,
a GPU labelling is right when it induces the same partition of the foreground
*and* every pixel holds the linear index of its blob's first pixel (raster
order), the blob's smallest index: that is what a union-find that always links
the larger root below the smaller one produces, and what label propagation
converges to. After compaction the labels must equal scipy's exactly.

Test images: random pixels at several densities (around the percolation
thresholds, about 0.59 for 4- and 0.41 for 8-connectivity), spirals and mazes
(long chains), combs (blobs that meet only at the far end), checkerboards
(where 4 and 8 differ), staircases and diagonal lines (links between 2x2 blocks in
every direction, across the corners of tiles), frames touching every border, empty
and full images, a single pixel, single rows and columns, odd sizes and sizes one
pixel around the edges of thread blocks and tiles. Simulator sizes stay tiny because
every CUDA thread is a Python thread there.

The block-based labelling (exercises 11 and 12) is checked against scipy and against
the rules of ``workbook.ccl_blocks``, which the lesson states.

Beside the declarations: :mod:`.cases` (typed cases), :mod:`.images`, :mod:`.inputs`,
:mod:`.references`, :mod:`.runs` (the launches), :mod:`.checks` with :mod:`.label_checks`
and :mod:`.block_checks` (the diagnoses), :mod:`.sim_watch` (race watches in the
simulator), :mod:`.profiles` (the launches ncu profiles); the slow, correct and buggy
variants in ``variants/`` (see :mod:`grader.exercises.corpus`).
"""

from __future__ import annotations

from grader.exercise import Exercise
from grader.exercises.ccl import checks, profiles, runs
from grader.exercises.ccl.cases import (
    BLOCK_CASES,
    CPU_CASES,
    FEW_IMAGE_CASES,
    IMAGE_CASES,
    PROPAGATION_CASES,
    SANITIZER_PROPAGATION_CASES,
    SCAN_CASES,
    STATS_BLOCK_CASES,
)
from grader.exercises.ccl.images import make_image
from grader.exercises.ccl.inputs import (
    make_compaction,
    make_image_inputs,
    make_scan,
    make_stats,
)
from grader.exercises.ccl.references import (
    expected_runs,
    expected_scan,
    expected_stats,
    expected_uf_init,
    first_pixel_labels,
    nothing_expected,
    scipy_labels,
    stats_reference,
    tile_label_pairs,
)
from grader.metric_rules import MetricRule

# imported from here by the lesson's notebooks (make_image, scipy_labels, tile_label_pairs)
# and by benchmarks/ccl.py (first_pixel_labels, scipy_labels, stats_reference)
__all__ = ["EXERCISES", "LESSON", "first_pixel_labels", "make_image", "scipy_labels",
           "stats_reference", "tile_label_pairs"]

LESSON = "05_ccl"

# --- metric rules (GPU only): compared with the reference solution profiled in the same run ---
DURATION = "gpu__time_duration.sum"
GLOBAL_LOADS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_LOAD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
CPU_ONLY = "CPU-only: plain Python"

EXERCISES = (
    Exercise(
        id="ccl.flood_fill", lesson=LESSON,
        title="CPU reference: flood-fill labelling (4 and 8 connectivity)",
        entry="flood_fill_label", points=2, cases=CPU_CASES,
        make_inputs=make_image_inputs, reference=nothing_expected,
        run=runs.run_flood, verify=checks.verify_cpu_labels,
        no_metric_rule=CPU_ONLY),
    Exercise(
        id="ccl.runs", lesson=LESSON, title="run-length encoding of the rows",
        entry="extract_runs", points=1, cases=CPU_CASES,
        make_inputs=make_image_inputs, reference=expected_runs,
        run=runs.run_runs, verify=checks.verify_runs,
        no_metric_rule=CPU_ONLY),
    Exercise(
        id="ccl.run_labels", lesson=LESSON,
        title="labelling by linking the runs of adjacent rows",
        entry="label_runs", needs=("extract_runs",), points=2, cases=CPU_CASES,
        make_inputs=make_image_inputs, reference=nothing_expected,
        run=runs.run_run_labels, verify=checks.verify_cpu_labels,
        no_metric_rule=CPU_ONLY),
    Exercise(
        id="ccl.propagation", lesson=LESSON,
        title="GPU label propagation: sweep until nothing changes",
        entry="propagation_label", needs=("init_labels_kernel", "propagate_kernel"), points=2,
        cases=PROPAGATION_CASES, sanitizer_cases=SANITIZER_PROPAGATION_CASES,
        make_inputs=make_image_inputs, reference=nothing_expected,
        run=runs.run_propagation, verify=checks.verify_propagation,
        no_metric_rule="the lesson's baseline, slow by design: its launches number the pixels "
                       "of the longest path through a blob, which the check counts; union-find "
                       "is what improves on it"),
    Exercise(
        id="ccl.uf_init", lesson=LESSON,
        title="GPU union-find, first launches: init links and compress",
        entry="uf_init_kernel", needs=("find_root", "uf_compress_kernel"), points=2,
        cases=IMAGE_CASES, make_inputs=make_image_inputs, reference=expected_uf_init,
        run=runs.run_uf_init, verify=checks.verify_uf_init,
        no_metric_rule="the per-pixel stepping stone: the Goal fixes its output pixel by pixel "
                       "(each pixel's parent by the smallest-neighbour rule, each root by its "
                       "chain), which the check compares; what those chains cost the compress "
                       "is section 7's subject, measured by exercise 11's rule"),
    # Exercises 6-8, each graded on the launch that carries its point, on a GPU-sized input,
    # through the student's own host function (its launch configuration included). Their
    # bounds come from counts derived by hand or with a numpy model of the reference and the
    # slow variant on the profiled input, then checked on a GPU run (tuned_on).
    Exercise(
        id="ccl.union_find", lesson=LESSON, title="GPU union-find: atomic merge and resolve",
        entry="union_find_label",
        needs=("find_root", "uf_init_kernel", "uf_compress_kernel", "find_root_atomic",
               "union", "uf_merge_kernel"), points=2,
        cases=IMAGE_CASES, make_inputs=make_image_inputs, reference=nothing_expected,
        run=runs.run_union_find, verify=checks.verify_union_find,
        metric_rules=(MetricRule(
            metric=DURATION, label="duration of the merge",
            why=("every union walks to a root, and on a dense image thousands of walks end at "
                 "the same root: reads that are read-modify-writes (cuda.atomic.or_ of "
                 "nothing) queue in the L2's atomic unit on that one address, where "
                 "load_relaxed reads it like any other load"),
            tuned_on="NVIDIA H100 80GB HBM3, 2026-11-26, finds with load_relaxed in the "
                     "reference: finds reading with atomic.or_ 5.78x the reference's duration; "
                     "correct merges up to 4.6x (union by compare-and-swap), a union for every "
                     "connected pair without the roots test 2.37x, although a numpy count on "
                     "UF_PROFILE's image gives it 7.4x the reference's unions and 13x the "
                     "unions that reach the busiest root, 84528 against 6502 (with atomic.or_ "
                     "reads in the reference, 2026-11-25 and earlier on 2026-11-26, it "
                     "measured 8.0x and 7.9x). The bound sits between, 15 % above the slowest "
                     "correct merge",
            max_ratio=5.3),),
        profile=profiles.profile_union_find, profile_kernels=("uf_merge_kernel",)),
    Exercise(
        id="ccl.scan", lesson=LESSON,
        title="exclusive prefix scan: block scan + scanned block sums",
        entry="exclusive_scan", needs=("block_scan_kernel", "add_offsets_kernel"), points=2,
        cases=SCAN_CASES, make_inputs=make_scan, reference=expected_scan,
        run=runs.run_scan, verify=checks.verify_scan,
        metric_rules=(MetricRule(
            metric=DURATION, label="duration of the block scan",
            why=("every thread of a block scans its own elements and the warps combine their "
                 "totals with shuffles, so the block streams its tile at the speed of memory; a "
                 "tile scanned serially by one thread leaves the other threads of the block "
                 "waiting"),
            tuned_on="NVIDIA H100 80GB HBM3, 2026-11-25: one thread scanning its block's tile "
                     "16.4x the reference's duration (estimated by hand at about 1 ms against "
                     "45-65 us), correct variants 1.06x and 1.85x (Hillis-Steele in shared "
                     "memory)",
            max_ratio=3.0),),
        profile=profiles.profile_scan, profile_kernels=("block_scan_kernel",)),
    Exercise(
        id="ccl.compaction", lesson=LESSON,
        title="consecutive labels 1..K: flag roots, scan, relabel",
        entry="compact_labels", needs=("flag_roots_kernel", "relabel_kernel", "exclusive_scan"),
        points=1, cases=FEW_IMAGE_CASES, make_inputs=make_compaction, reference=nothing_expected,
        run=runs.run_compaction, verify=checks.verify_compaction,
        metric_rules=(MetricRule(
            metric=GLOBAL_LOAD_SECTORS, label="global load sectors of the relabel",
            why=("consecutive threads relabel consecutive pixels, so a warp's 32 labels share four "
                 "32-byte sectors; a thread that relabels a run of consecutive pixels makes each "
                 "load of its warp touch 32 sectors"),
            tuned_on="NVIDIA H100 80GB HBM3, 2026-11-25: 16 consecutive pixels per thread "
                     "6.58x the reference's sectors, the coalesced forms 1.00x, as a numpy "
                     "count of the 32-byte sectors each warp's loads touch on "
                     "COMPACTION_PROFILE's labels predicted (658236 for the reference, "
                     "4328788)",
            max_ratio=2.0),),
        profile=profiles.profile_compaction, profile_kernels=("relabel_kernel",)),
    Exercise(
        id="ccl.stats", lesson=LESSON, title="blob statistics with one atomic per pixel and field",
        entry="blob_stats_kernel", points=1,
        cases=IMAGE_CASES, make_inputs=make_stats, reference=expected_stats,
        run=runs.run_stats, verify=checks.verify_stats,
        no_metric_rule="the lesson's baseline for exercise 10, seven global atomics per pixel "
                       "by design: exercise 10's rule measures what per-block partials save"),
    Exercise(
        id="ccl.stats_block", lesson=LESSON,
        title="blob statistics from per-block partials (shared hash table)",
        entry="blob_stats_block_kernel", needs=("TILE", "STATS_THREADS"), points=3,
        cases=STATS_BLOCK_CASES, make_inputs=make_stats, reference=expected_stats,
        run=runs.run_stats_block, verify=checks.verify_stats_block,
        # No counter of atomics here: on the H200, ncu's
        # l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum read 0 for numba's global atomics
        # (SASS ATOMG) in both kernels, so it separates nothing.
        metric_rules=(MetricRule(
            metric=DURATION, label="duration",
            why=("atomics on one address serialise: one global atomic per field for each blob "
                 "of a tile, not one per pixel, lets the kernel run at the speed of its loads "
                 "(against the reference with its warp step, correct kernels written other "
                 "ways measured 1.33-4.94x on an H100, 2026-11-26, and one atomic per pixel "
                 "45.6x)"),
            tuned_on="NVIDIA H200 (cc 9.0), 2026-11-22; NVIDIA H100 80GB HBM3, 2026-11-26",
            max_ratio=6.0),),
        profile=profiles.profile_stats_block, profile_kernels=("blob_stats_block_kernel",)),
    # The block init, graded by what its links cost the compress that follows it: every step
    # of a walk is a global load, and links that leave the tile let walks cross the image.
    Exercise(
        id="ccl.block_init", lesson=LESSON,
        title="block labelling, init: a node per 2x2 block, links inside the tile, unions only "
              "where missing",
        entry="init_block_8", needs=("block_init_kernel", "pixel"), points=3,
        cases=BLOCK_CASES, make_inputs=make_image_inputs, reference=nothing_expected,
        run=runs.run_block_init, verify=checks.verify_block_init,
        metric_rules=(MetricRule(
            metric=GLOBAL_LOADS, label="global load requests of the compress after your init",
            why=("compress walks each cell's chain of links to its root, a load per step: links "
                 "inside the tile keep every walk within a few dozen steps, links that leave it "
                 "let walks cross the image"),
            tuned_on="NVIDIA H100 80GB HBM3, 2026-11-25: links to S first 1.60x the "
                     "reference's load requests, links leaving the tile 14.1x (the model of "
                     "workbook.ccl_blocks predicted 1.54x and 12.9x)",
            max_ratio=3.0),),
        profile=profiles.profile_block_init, profile_kernels=("uf_compress_kernel",)),
    Exercise(
        id="ccl.block_label", lesson=LESSON,
        title="block labelling: merge, resolve, number and write the labels",
        entry="block_label",
        needs=("join", "block_merge_kernel", "resolve_roots_kernel", "resolve_cells_kernel",
               "block_final_kernel", "block_init_kernel", "init_block_8", "union",
               "uf_compress_kernel", "exclusive_scan"), points=3,
        cases=BLOCK_CASES, make_inputs=make_image_inputs, reference=nothing_expected,
        run=runs.run_block_label, verify=checks.verify_block_label,
        no_metric_rule="what its launches cost follows from exercise 11's links (the unions "
                       "they ask for, the roots of the init's forest that walk), which exercise "
                       "11 checks and its rule measures; its own steps (unions from the "
                       "compressed roots, walks from the init's roots only) are the Goal's, and "
                       "checked for races in the simulator"),
    Exercise(
        id="ccl.gpu_runs", lesson=LESSON,
        title="stretch: run extraction on the GPU (count, scan, write)",
        entry="gpu_extract_runs", needs=("count_runs_kernel", "write_runs_kernel"), points=2,
        cases=FEW_IMAGE_CASES, make_inputs=make_image_inputs, reference=expected_runs,
        run=runs.run_gpu_runs, verify=checks.verify_runs,
        no_metric_rule="stretch: the Goal's own design, one thread reading each row in turn, "
                       "is the uncoalesced form the text calls slow, so no plausible slower "
                       "submission is left for a rule against it to catch; the warp-per-row "
                       "version is an aside"),
)
