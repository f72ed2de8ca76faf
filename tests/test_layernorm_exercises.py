"""Lesson 04: the solutions pass, and known-buggy variants are rejected with a diagnosis."""

import warnings

import numpy as np
import pytest
from solution_cells import (
    assert_rejected,
    bug_id,
    exercise_cell,
    namespace_with,
    namespace_with_variant,
)

import workbook
from grader.exercise import Mismatch, check_exercise
from grader.exercises import get as get_exercise
from grader.exercises import layernorm

LESSON = "04_layernorm"

SIM_ONLY = pytest.mark.sim_only  # found by the simulator's sanitizer or warp checks


# A warp kernel with the naive one-pass variance: sums of x and x^2, reduced with shuffles.
NAIVE_WARP = '''
@cuda.jit(device=True)
def welford_warp_allreduce(mean, m2, count, width):
    return mean, m2, count


def make_warp_layernorm(cols_per_thread, width, rows_per_access):
    @cuda.jit
    def warp_layernorm_kernel(x, gamma, beta, affine, eps, y, mean, rstd):
        rows, cols = x.shape
        lane = cuda.threadIdx.x % width
        step = cuda.gridsize(1) // width
        row = cuda.grid(1) // width
        warp_row = row - (cuda.threadIdx.x % WARP_SIZE) // width
        while warp_row < rows:
            s = q = float32(0.0)
            for i in range(cols_per_thread):
                col = i * width + lane
                if row < rows and col < cols:
                    v = float32(x[row, col])
                    s += v
                    q += v * v
            offset = width // 2
            while offset > 0:
                s += cuda.shfl_xor_sync(FULL_MASK, s, offset)
                q += cuda.shfl_xor_sync(FULL_MASK, q, offset)
                offset //= 2
            if row < rows:
                m = s / float32(cols)
                var = q / float32(cols) - m * m
                inv_std = float32(1.0) / math.sqrt(max(var, float32(0.0)) + eps)
                if lane == 0:
                    mean[row] = m
                    rstd[row] = inv_std
                for i in range(cols_per_thread):
                    col = i * width + lane
                    if col < cols:
                        value = (float32(x[row, col]) - m) * inv_std
                        if affine:
                            value = value * float32(gamma[col]) + float32(beta[col])
                        y[row, col] = value
            row += step
            warp_row += step

    return warp_layernorm_kernel
'''

BROADCAST = ("    mean = cuda.shfl_sync(FULL_MASK, mean, first)\n"
             "    m2 = cuda.shfl_sync(FULL_MASK, m2, first)\n"
             "    count = cuda.shfl_sync(FULL_MASK, count, first)\n")
RSTD = "inv_std = float32(1.0) / math.sqrt(m2 / n + eps)"

# A bound one past the end of a row: the simulator raises IndexError ("... is out of bounds
# ..."); on a GPU a load there reads the NaN after the row and a store there changes the
# padding after it ("... past the end of ...").
PAST_END = {"sim": ("out of bounds", "is out of bounds for axis"),
            "gpu": ("wrong result", "past the end of")}
# the first pass of the uncached kernel: loads guarded by `col < cols`, then the updates
FIRST_UPDATE = "if col < cols:\n                    m, m2, n"
SECOND_LOAD = ("if col < cols:\n                    values[k] = float32(x[row, col])\n"
               "            for k in range(UNROLL):\n                col = start + k * block\n"
               "                if col < cols:\n                    value")
WARP_LOAD = "if row < rows and col < cols:"
WARP_STORE = "if col < cols:\n                            value = (buf"

# (exercise, bug, text in the solution, replacement, expected rejection: (kind, words in the
# message: a phrase or a tuple of alternatives) with kind a key of BUG_STATUSES, or a dict of
# them by mode)
BUGGY = [
    # the load is guarded right, the update one past: a value never loaded (stale from the
    # previous pass, or never written) joins the statistics of every row. On a GPU a value
    # never written is an undefined register: rejected, but what the statistics become (and
    # so which of the statistics' messages) depends on it
    ("block_uncached", "first pass counts one element past the row", FIRST_UPDATE,
     FIRST_UPDATE.replace("col < cols", "col <= cols"),
     {"sim": ("wrong result", "past the end of the row"),
      "gpu": ("wrong result", ("mean and rstd of rows", "Rows with a wrong", "wrong elements"))}),
    # on a GPU the value read is never used: the result is right, and only the simulator (or
    # memcheck on exact-size buffers) sees the read
    pytest.param("block_uncached", "second pass loads one past the row", SECOND_LOAD,
                 SECOND_LOAD.replace("col < cols", "col <= cols", 1),
                 ("out of bounds", "is out of bounds for axis 1"), marks=SIM_ONLY),
    ("warp", "loads one past the row (col <= cols)", WARP_LOAD,
     WARP_LOAD.replace("col < cols", "col <= cols"), PAST_END),
    ("warp", "stores one past the row (col <= cols)", WARP_STORE,
     WARP_STORE.replace("col < cols", "col <= cols"), PAST_END),
    ("variance", "two-pass computed with E[x^2] - E[x]^2",
     "deviation = x - mean[:, None]\n    return (deviation * deviation).sum(axis=1, "
     "dtype=np.float32) / n", "return (x * x).sum(axis=1, dtype=np.float32) / n - mean * mean",
     ("wrong result", "cancels catastrophically")),
    ("variance", "Welford m2 from the old mean only", "m2 = m2 + delta * (value - mean)",
     "m2 = m2 + delta * delta", ("wrong result", "welford variance of row")),
    ("variance", "sample variance", "    return m2 / count\n", "    return m2 / (count - 1)\n",
     ("wrong result", "sample variance")),
    ("variance", "combine without the spread between the means",
     "m2 = m2_a + m2_b + delta * delta * count_a * share_b", "m2 = m2_a + m2_b",
     ("wrong result", "delta^2")),
    ("variance", "combine with the weights swapped",
     "share_b = count_b / np.maximum(count, np.float32(1))",
     "share_b = count_a / np.maximum(count, np.float32(1))", ("wrong result", "swapped")),
    ("variance", "combine of two empty sides divides by zero",
     "count_b / np.maximum(count, np.float32(1))", "count_b / count",
     ("wrong result", "empty sides")),
    ("warp", "naive variance in the kernel", None, NAIVE_WARP,
     ("wrong result", "cancels catastrophically")),
    ("warp", "no broadcast from the group's first lane", BROADCAST, "",
     ("wrong result", "Mean and rstd are right, so look at the stores")),
    ("warp", "count not shuffled (wrong combine)",
     "b_count = cuda.shfl_down_sync(FULL_MASK, count, offset)", "b_count = count",
     ("wrong result", "Rows with a wrong mean")),
    pytest.param("warp", "loop condition differs between the groups of a warp",
                 "while warp_row < rows:", "while first_row < rows:",
                 ("warp", "exited without reaching"), marks=SIM_ONLY),
    # the padding columns of the row's last group are read: the simulator stops at the index,
    # on a GPU they hold the NaN after the row
    ("warp", "padding columns read", "if row < rows and col < cols:", "if row < rows:",
     PAST_END),
    ("warp", "eps missing", RSTD, "inv_std = float32(1.0) / math.sqrt(m2 / n)",
     ("wrong result", "eps is missing")),
    ("warp", "gamma and beta ignored",
     "value = value * float32(gamma[col]) + float32(beta[col])", "value = value",
     ("wrong result", "gamma and beta were not applied")),
    pytest.param("block_smem", "no barrier after the warps' stores",
                 "        warp_count[warp] = count\n    cuda.syncthreads()\n",
                 "        warp_count[warp] = count\n",
                 ("race", "data race on shared memory warp_"), marks=SIM_ONLY),
    pytest.param("block_smem", "no barrier before the result is read",
                 "            result[2] = count\n    cuda.syncthreads()\n",
                 "            result[2] = count\n",
                 ("race", "data race on shared memory result["), marks=SIM_ONLY),
    pytest.param("block_smem", "warp 0 reads entries of warps that do not exist",
                 "        if lane < warps:\n", "        if True:\n",
                 ("uninitialised", "read of uninitialised shared memory warp_"),
                 marks=SIM_ONLY),
    ("block_smem", "no grid-stride loop", "row += cuda.gridDim.x", "row += rows",
     ("wrong result", "grid-stride")),
    ("block_uncached", "no grid-stride loop", "row += cuda.gridDim.x", "row += rows",
     ("wrong result", "grid-stride")),
    ("block_uncached", "eps added to the standard deviation", RSTD,
     "inv_std = float32(1.0) / (math.sqrt(m2 / n) + eps)",
     ("wrong result", "inside the square root")),
    ("dispatch", "statistics in the input's dtype",
     "mean = cuda.device_array(rows, dtype=np.float32)",
     "mean = cuda.device_array(rows, dtype=x.dtype)", ("wrong result", "must be float32")),
    ("dispatch", "warp kernel for every row length", "if cols <= WARP_MAX_COLS:", "if True:",
     ("wrong result", "expected 'smem'")),
    ("dispatch", "shared memory even when it does not fit",
     "    if resident > 0:\n        block = 128", "    if True:\n        block = 128",
     ("wrong result", "expected 'uncached'")),
    ("dispatch", "eps ignored", "np.float32(eps)", "np.float32(1e-5)",
     ("wrong result", "Rows with a wrong rstd")),
]


@pytest.mark.parametrize("exercise", [e.id.split(".")[1] for e in layernorm.EXERCISES])
def test_solution_passes(exercise):
    ns = namespace_with(LESSON, f"layernorm.{exercise}")
    result = check_exercise(get_exercise(f"layernorm.{exercise}"), ns, workbook.MODE)
    assert result.passed, result.summary()


@pytest.mark.parametrize("exercise,bug,old,new,expect", BUGGY, ids=[bug_id(b) for b in BUGGY])
def test_buggy_variant_rejected(exercise, bug, old, new, expect):
    exercise_id = f"layernorm.{exercise}"
    if old is None:  # the whole cell
        old = exercise_cell(LESSON, exercise_id)
    ns = namespace_with(LESSON, exercise_id, old, new)
    with warnings.catch_warnings():  # a GPU divides by zero silently; so does the grader
        warnings.simplefilter("ignore", RuntimeWarning)
        result = check_exercise(get_exercise(exercise_id), ns, workbook.MODE)
    assert_rejected(result, bug, expect, workbook.MODE)


@pytest.mark.parametrize("exercise", sorted(layernorm.SLOW_VARIANTS))
def test_slow_variants_are_correct(exercise):
    """The metric rules' slow variants must be graded correct on their output."""
    ns = namespace_with_variant(LESSON, exercise, layernorm.SLOW_VARIANTS[exercise])
    result = check_exercise(get_exercise(exercise), ns, workbook.MODE)
    assert result.passed, result.summary()


# --- the comparison itself, on hand-made outputs -----------------------------------------------

def _inputs(x, affine=True, eps=1e-5, seed=0):
    rng = np.random.default_rng(seed)
    cols = x.shape[1]
    gamma = (1 + 0.5 * rng.standard_normal(cols)).astype(x.dtype)
    beta = rng.standard_normal(cols).astype(x.dtype)
    return {"x": x, "gamma": gamma, "beta": beta, "affine": affine, "eps": np.float32(eps)}


def _rounded(expected, dtype):
    y, mean, rstd = expected
    return y.astype(dtype), mean.astype(np.float32), rstd.astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reference_rounded_to_the_output_types_passes(dtype):
    x = layernorm.make_rows(np.random.default_rng(1), 6, 300, "large-mean", np.dtype(dtype).name)
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    layernorm.expect_layer_norm(_rounded(expected, dtype), inputs, expected, seq=10)


def test_naive_variance_is_rejected_on_large_mean_rows():
    x = layernorm.make_rows(np.random.default_rng(2), 8, 512, "large-mean", "float32")
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    n = np.float32(x.shape[1])
    mean = x.sum(axis=1, dtype=np.float32) / n
    var = (x * x).sum(axis=1, dtype=np.float32) / n - mean * mean
    rstd = (1 / np.sqrt(np.maximum(var, 0) + np.float32(1e-5))).astype(np.float32)
    got = (expected[0].astype(np.float32), mean, rstd)
    with pytest.raises(Mismatch, match="cancels catastrophically"):
        layernorm.expect_layer_norm(got, inputs, expected, seq=16)


def test_float32_welford_on_the_cpu_is_within_tolerance():
    from workbook.welford import parallel_welford

    x = layernorm.make_rows(np.random.default_rng(3), 16, 4096, "large-mean", "float32")
    inputs = _inputs(x, affine=False)
    expected = layernorm.reference_layer_norm(inputs)
    mean, m2, count = parallel_welford(x, threads=32)
    rstd = (np.float32(1) / np.sqrt(m2 / count + np.float32(1e-5))).astype(np.float32)
    y = ((x - mean[:, None]) * rstd[:, None]).astype(np.float32)
    layernorm.expect_layer_norm((y, mean, rstd), inputs, expected, seq=128)


def test_unwritten_rows_and_columns_are_named():
    x = layernorm.make_rows(np.random.default_rng(4), 10, 40, "normal", "float32")
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    y, mean, rstd = _rounded(expected, np.float32)
    late_mean, late_rstd = mean.copy(), rstd.copy()
    late_mean[6:] = late_rstd[6:] = layernorm.unwritten(4)  # what the launches start with
    with pytest.raises(Mismatch, match="from 6 on.*grid-stride"):
        layernorm.expect_layer_norm((y, late_mean, late_rstd), inputs, expected, seq=2)
    with pytest.raises(Mismatch, match="negative variance"):
        layernorm.expect_layer_norm((y, mean, late_rstd), inputs, expected, seq=2)
    # a NaN the kernel computed and stored is no unwritten element: NaN got into the sums
    computed_mean, computed_rstd = mean.copy(), rstd.copy()
    computed_mean[6:] = computed_rstd[6:] = np.nan
    with pytest.raises(Mismatch, match=r"kernel wrote them: a NaN entered.*past the end of"):
        layernorm.expect_layer_norm((y, computed_mean, computed_rstd), inputs, expected, seq=2)
    holes = y.copy()
    holes[:, 32:] = np.nan
    with pytest.raises(Mismatch, match="never written"):
        layernorm.expect_layer_norm((holes, mean, rstd), inputs, expected, seq=2)


def test_missing_eps_and_gamma_are_diagnosed():
    x = layernorm.make_rows(np.random.default_rng(5), 9, 64, "eps", "float32")
    inputs = _inputs(x, eps=1e-3)
    expected = layernorm.reference_layer_norm(inputs)
    y, mean, rstd = _rounded(expected, np.float32)
    var = x.astype(np.float64).var(axis=1)
    with np.errstate(divide="ignore"):
        no_eps = (1 / np.sqrt(var)).astype(np.float32)
    with pytest.raises(Mismatch, match="eps is missing"):
        layernorm.expect_layer_norm((y, mean, no_eps), inputs, expected, seq=2)
    xhat = (x - expected[1][:, None]) * expected[2][:, None]
    with pytest.raises(Mismatch, match="gamma and beta were not applied"):
        layernorm.expect_layer_norm((xhat.astype(np.float32), mean, rstd), inputs, expected,
                                    seq=2)


def test_statistics_must_be_float32():
    x = layernorm.make_rows(np.random.default_rng(6), 3, 20, "normal", "float16")
    inputs = _inputs(x)
    expected = layernorm.reference_layer_norm(inputs)
    y, mean, rstd = _rounded(expected, np.float16)
    with pytest.raises(Mismatch, match="must be float32"):
        layernorm.expect_layer_norm((y, mean.astype(np.float16), rstd), inputs, expected, seq=1)
