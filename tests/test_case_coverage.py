"""The simulator's cases reach every decision and every loop path they claim to: the
dispatchers' plans on both sides of each decision (lessons 03 and 04), and each path of
the block LayerNorm kernels' unrolled loops (lesson 04); and the bugs that hid in the
shapes the cases did not reach are caught."""

import pytest
from solution_cells import assert_rejected, namespace_with

import workbook
from grader.exercise import check_exercise
from grader.exercises import get, layernorm, softmax
from workbook.occupancy import estimate_active_blocks

SIM = pytest.mark.sim_only  # the plans' bounds are the simulator's occupancy estimate
WRONG = "wrong result"


# --- the dispatchers' plans --------------------------------------------------------------------

def boundaries(decide, last: int) -> list[int]:
    """The column counts c (1 <= c < last) after which ``decide(c)`` changes."""
    return [c for c in range(1, last) if decide(c) != decide(c + 1)]


def softmax_plan_columns(dtype: str) -> set[int]:
    cases = get("softmax.dispatch").cases["sim"]
    return {c.cols for c in cases if c.kind == "plan" and c.dtype == dtype}


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_softmax_plans_are_checked_on_both_sides_of_every_decision(dtype):
    """Where the kernels the grader allows change from one column count to the next, the
    plan is checked at both counts, except on a side where either kernel is allowed (near
    the shared-memory limit, where it depends on the GPU)."""
    limit = softmax.SMEM_LIMIT // 4 + 2
    found = boundaries(lambda c: softmax.expected_variant(c, dtype), limit)
    assert found, "no decision found"
    want = {c for b in found for c in (b, b + 1) if len(softmax.expected_variant(c, dtype)) == 1}
    assert want <= softmax_plan_columns(dtype), sorted(want - softmax_plan_columns(dtype))


def test_layernorm_plans_are_checked_on_both_sides_of_every_decision():
    """The reference plan's decisions, from the lesson's rule (the warp kernel up to
    WARP_MAX_COLS columns, then shared memory while a block of 128 threads fits, by the
    simulator's occupancy estimate) and not from the cases' own constants."""
    def reference_kind(cols):
        if cols <= 1024:  # the lesson's WARP_MAX_COLS
            return "warp"
        return "smem" if estimate_active_blocks(128, 4 * cols) > 0 else "uncached"

    found = boundaries(reference_kind, 70000)
    assert len(found) == 2, found
    plans = {c.size: c.plan for c in get("layernorm.dispatch").cases["sim"] if c.plan}
    for b in found:
        for cols in (b, b + 1):
            assert plans.get(cols) == reference_kind(cols), (cols, plans)


# Plans wrong on one side of a decision, which only the cases at the decision catch.
PLAN_BUGS = [
    ("03_softmax", "softmax.dispatch", "the warp kernel only below 2048 columns",
     "    if cols <= WARP_MAX_COLS:\n", "    if cols < WARP_MAX_COLS:\n",
     "plan for 2x2048 float32 chose 'block_smem'; expected 'warp'"),
    ("03_softmax", "softmax.dispatch", "rows in shared memory up to 48 KiB (no opt-in)",
     "    if threads:\n        return \"block_smem\"",
     "    if threads and shared <= 48 * 1024:\n        return \"block_smem\"",
     "plan for 2x54016 float32 chose 'block_uncached'; expected 'block_smem'"),
    ("04_layernorm", "layernorm.dispatch", "the warp kernel only below 1024 columns",
     "    if cols <= WARP_MAX_COLS:\n", "    if cols < WARP_MAX_COLS:\n",
     "plan for (2, 1024) float32: kind 'smem', expected 'warp'"),
    ("04_layernorm", "layernorm.dispatch", "rows in shared memory up to 48 KiB (no opt-in)",
     "\n    if resident > 0:\n        block = 128\n",
     "\n    if resident > 0 and shared_bytes <= 48 * 1024:\n        block = 128\n",
     "plan for (2, 58112) float32: kind 'uncached', expected 'smem'"),
]


@SIM
@pytest.mark.parametrize("lesson,exercise,bug,old,new,words", PLAN_BUGS,
                         ids=[f"{b[1]}-{b[2].replace(' ', '_')}" for b in PLAN_BUGS])
def test_a_plan_wrong_at_a_decision_is_rejected(lesson, exercise, bug, old, new, words):
    ns = namespace_with(lesson, exercise, old, new)
    result = check_exercise(get(exercise), ns, workbook.MODE)
    assert_rejected(result, bug, (WRONG, words), workbook.MODE)


# --- the block LayerNorm kernels' unrolled loops ----------------------------------------------

UNROLL = layernorm.UNROLL
FIRST, LATER = "first pass of the loop", "a later pass"
IN, PAST = "in the row", "past its end"


def loop_paths(cols: int, block: int) -> set[tuple[str, int, str]]:
    """The paths the reference's loop over a row takes in a block of ``block`` threads:

        for start in range(t, cols, UNROLL * block):
            for k in range(UNROLL):
                col = start + k * block
                if col < cols: ...

    (both passes over the row of both block kernels): which pass of the loop, which of the
    UNROLL elements, and whether that element is in the row."""
    paths = set()
    for t in range(block):
        for start in range(t, cols, UNROLL * block):
            for k in range(UNROLL):
                paths.add((FIRST if start == t else LATER, k,
                           IN if start + k * block < cols else PAST))
    return paths


# every path some row length takes (the first element of a pass is always in the row)
REACHABLE = set().union(*(loop_paths(cols, 32) for cols in range(1, 3 * UNROLL * 32)))


def reaching(exercise_id: str) -> dict[tuple, list[str]]:
    """Each path, with the simulator's cases of the exercise that reach it."""
    found: dict[tuple, list[str]] = {path: [] for path in REACHABLE}
    for case in get(exercise_id).cases["sim"]:
        for path in loop_paths(case.size, case.block):
            found[path].append(f"{case.size} columns in blocks of {case.block}")
    return found


def test_the_loop_has_the_paths_the_model_says():
    assert len(REACHABLE) == 2 * UNROLL * 2 - 2  # element 0 of a pass is never past the end
    assert loop_paths(1, 32) == {(FIRST, 0, IN)} | {(FIRST, k, PAST) for k in range(1, UNROLL)}


@pytest.mark.parametrize("exercise_id", ["layernorm.block_smem", "layernorm.block_uncached"])
@pytest.mark.parametrize("path", sorted(REACHABLE), ids=lambda p: f"{p[0]}-element{p[1]}-{p[2]}")
def test_the_simulator_cases_reach_every_path_of_the_unrolled_loop(exercise_id, path):
    assert reaching(exercise_id)[path], f"no simulator case of {exercise_id} reaches {path}"


def test_only_the_longest_row_loads_every_element_of_a_later_pass():
    """Hand-derived: thread t loads element UNROLL - 1 of its second pass at column
    t + (2 * UNROLL - 1) * block, inside the row for t = 0 when cols > 7 * block: 225 or more
    columns in blocks of 32, 449 in blocks of 64. Of the simulator's shapes only the row of
    2 * UNROLL * 32 - 1 = 255 columns in blocks of 32 does."""
    for exercise_id in ("layernorm.block_smem", "layernorm.block_uncached"):
        assert reaching(exercise_id)[(LATER, UNROLL - 1, IN)] == ["255 columns in blocks of 32"]


# The uncached kernel's second pass keeps the element it loaded last in the first pass instead
# of loading it again: right while each thread makes one pass over the row (its last element
# then is the one it needs), wrong once it makes two and the second loads its last element.
REUSED_LAST = """            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    values[k] = float32(x[row, col])
            for k in range(UNROLL):
                col = start + k * block
                if col < cols:
                    value = """


@SIM
def test_a_bug_in_the_last_element_of_a_later_pass_is_caught():
    new = REUSED_LAST.replace("            for k in range(UNROLL):\n", "            for k in "
                              "range(UNROLL - 1):  # the last one is still in values\n", 1)
    ns = namespace_with("04_layernorm", "layernorm.block_uncached", REUSED_LAST, new)
    result = check_exercise(get("layernorm.block_uncached"), ns, workbook.MODE)
    assert_rejected(result, "last element reused from the first pass",
                    (WRONG, "3x255 float32"), workbook.MODE)


def test_rows_past_the_grid_are_reached():
    """Each block kernel's sim cases give a block a second row (rows > grid)."""
    for exercise_id in ("layernorm.block_smem", "layernorm.block_uncached"):
        assert any(c.rows > c.grid for c in get(exercise_id).cases["sim"]), exercise_id
