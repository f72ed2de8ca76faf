"""The simulator's diagnoses of the lessons' own bugs name the right fix.

Race hints follow from the kind of race (workbook.sim.sanitizer.race_hint and
workbook.sim.global_races): a write and a read in different statements of one barrier
interval want a ``cuda.syncthreads()``; many threads running one store or
read-modify-write on one element, or a plain update of an element that other threads
update atomically, want an atomic; blocks of one launch want an atomic or a second kernel
launch, since no barrier orders them. A collective that some lanes of its mask skip is
reported root first: the lane that left, its line and the collective it skipped.

Each bug below is a planted variant of a lesson's solution, graded as a student's cell is.
"""

import re

import pytest
from solution_cells import namespace_with
from test_softmax_exercises import LAST_PASS, LINEAR_LAST_PASS

import workbook
from grader.exercise import check_exercise
from grader.exercises import get as get_exercise
from workbook.sim import sanitizer

pytestmark = [
    pytest.mark.sim_only,  # the simulator's sanitizer and warp checks
    pytest.mark.skipif(not sanitizer.is_enabled(), reason="the simulator's sanitizer is off"),
]

LESSONS = {"reduction": "02_reduction", "softmax": "03_softmax", "layernorm": "04_layernorm",
           "ccl": "05_ccl"}

BARRIER = "missing cuda.syncthreads()?"
ONE_ATOMIC = "make the update one atomic operation"  # one read-modify-write, many threads
ATOMIC_TOO = "make the update atomic too"  # a plain update beside atomic ones
FLAG = "stores the same value on purpose"  # one store, many threads
BETWEEN_BLOCKS = "no barrier can help"
ATOMIC_HINTS = (ONE_ATOMIC, ATOMIC_TOO)
# the merges race within a block or, where the random image puts no two merges of one root
# in a block, between blocks (the forest is watched): an atomic either way
MERGE_HINTS = (*ATOMIC_HINTS, BETWEEN_BLOCKS)
# the same for a plain += on a blob's statistic: within a block where two of its pixels hold
# one label, else between blocks; either hint must name the atomic add
PLUS_HINTS = (ONE_ATOMIC, BETWEEN_BLOCKS)

UNION_ATOMIC = ("        old = cuda.atomic.min(forest, a, b)\n        if old == a:\n"
                "            return\n        a = old\n")

# (exercise, bug, text in the solution, replacement, hints of which one must appear, hints
# that must not)
RACES = [
    ("reduction.simple", "missing barrier", "        cuda.syncthreads()\n", "", (BARRIER,),
     ATOMIC_HINTS),
    ("reduction.shared", "missing barrier", "        cuda.syncthreads()\n", "", (BARRIER,),
     ATOMIC_HINTS),
    ("reduction.segmented", "plain += across blocks", "cuda.atomic.add(output, 0, total)",
     "output[0] += total", (BETWEEN_BLOCKS,), (BARRIER,)),
    ("softmax.block_smem", "missing barrier before the last pass", LAST_PASS, LINEAR_LAST_PASS,
     (BARRIER,), ATOMIC_HINTS),
    ("layernorm.block_smem", "no barrier after the warps' stores",
     "        warp_count[warp] = count\n    cuda.syncthreads()\n",
     "        warp_count[warp] = count\n", (BARRIER,), ATOMIC_HINTS),
    ("layernorm.block_smem", "no barrier before the result is read",
     "            result[2] = count\n    cuda.syncthreads()\n", "            result[2] = count\n",
     (BARRIER,), ATOMIC_HINTS),
    ("ccl.union_find", "merge read then written back without an atomic",
     "old = cuda.atomic.min(forest, a, b)", "old = forest[a]\n        forest[a] = min(old, b)",
     MERGE_HINTS, (BARRIER,)),
    ("ccl.union_find", "forest[a] = b", UNION_ATOMIC, "        forest[a] = b\n        return\n",
     MERGE_HINTS, (BARRIER,)),
    ("ccl.propagation", "changed[0] = 1 by every thread", "cuda.atomic.max(changed, 0, 1)",
     "changed[0] = 1", (FLAG,), (BARRIER,)),
    ("ccl.stats", "area[k] += 1", "cuda.atomic.add(area, k, 1)", "area[k] += 1", PLUS_HINTS,
     (BARRIER,)),
    ("ccl.stats_block", "slot claimed without compare-and-swap",
     "        old = cuda.atomic.cas(keys, s, EMPTY, k)\n",
     "        old = keys[s]\n        keys[s] = k if old == EMPTY else old\n", (ONE_ATOMIC,),
     (BARRIER,)),
]


def _graded(exercise_id: str, old: str, new: str) -> str:
    lesson = LESSONS[exercise_id.split(".")[0]]
    namespace = namespace_with(lesson, exercise_id, old, new)
    result = check_exercise(get_exercise(exercise_id), namespace, workbook.MODE)
    assert not result.passed, f"the bug was not caught: {result.summary()}"
    return result.summary()


def _hint(summary: str) -> str:
    """The hint of the first race report in a check's summary."""
    found = re.search(r"racecheck: data race on .*?(between them: |between blocks: )(.*?)\n",
                      summary, re.S)
    assert found, summary
    return found.group(2)


@pytest.mark.parametrize("exercise,bug,old,new,wanted,unwanted", RACES,
                         ids=[f"{r[0]}-{r[1].replace(' ', '_')}" for r in RACES])
def test_race_hint_names_the_fix(exercise, bug, old, new, wanted, unwanted):
    hint = _hint(_graded(exercise, old, new))
    assert any(w in hint for w in wanted), hint
    assert not any(w in hint for w in unwanted), hint
    if BETWEEN_BLOCKS in hint and wanted is MERGE_HINTS:
        assert "cuda.atomic" in hint and "second kernel launch" in hint, hint
    if BETWEEN_BLOCKS in hint and wanted is PLUS_HINTS:
        assert "cuda.atomic.add for +=" in hint, hint


def test_the_flag_hint_says_one_value_is_benign():
    hint = _hint(_graded("ccl.propagation", "cuda.atomic.max(changed, 0, 1)", "changed[0] = 1"))
    assert "right on a GPU in practice" in hint and "cuda.atomic.max(changed, 0, 1)" in hint


def test_blocks_updating_one_element_are_told_to_use_an_atomic():
    summary = _graded("reduction.segmented", "cuda.atomic.add(output, 0, total)",
                      "output[0] += total")
    assert "data race on output[0] between blocks" in summary
    assert "cuda.syncthreads() orders the threads of one block only" in summary
    assert "cuda.atomic.add for +=" in summary


LEFT = (r"lane \d+ of warp \d+ \(block \([\d,]+\)\) exited without reaching {op} with mask "
        r"0x[0-9a-f]{{8}}, which names it: it left the kernel at <cell \d+>:\d+ in \w+")
IN_BARRIER = (r"lane \d+ of warp \d+ \(block \([\d,]+\)\) is named in {op} with mask "
              r"0x[0-9a-f]{{8}} but waits in cuda.syncthreads\(\) at <cell \d+>:\d+ in \w+")

# (exercise, bug, text in the solution, replacement, the root as the report's first words)
SKIPPED_COLLECTIVES = [
    ("softmax.warp", "loop condition differs between the groups of a warp",
     "while tile < rows:", "while tile + first < rows:", LEFT.format(op="shfl_xor_sync")),
    ("layernorm.warp", "loop condition differs between the groups of a warp",
     "while warp_row < rows:", "while first_row < rows:",
     LEFT.format(op=r"shfl_(down_|xor_)?sync")),
    # the lanes past n go on to the block's barrier: that is where the root waits
    ("reduction.shuffle", "warp sum inside `if i < n`",
     "    acc = warp_sum(acc)\n    lane", "    if cuda.grid(1) < n:\n        acc = warp_sum(acc)\n"
     "    lane", IN_BARRIER.format(op="shfl_down_sync")),
]


@pytest.mark.parametrize("exercise,bug,old,new,root", SKIPPED_COLLECTIVES,
                         ids=[f"{s[0]}-{s[1].split(' `')[0].replace(' ', '_')}"
                              for s in SKIPPED_COLLECTIVES])
def test_a_skipped_collective_is_reported_root_first(exercise, bug, old, new, root):
    summary = _graded(exercise, old, new)
    assert re.search(rf"WarpCollectiveError: {root}", summary), summary  # the root first
    assert "stopped with" not in summary, summary  # no chain of lanes before it
