"""#21: f32 softmax rows of 32-128 columns: warp-kernel variants against torch, interleaved."""
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(os.environ.get("OUT", "/tmp/out"))
ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))
import workbook  # noqa: E402,F401
import torch  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import cuda, float32  # noqa: E402
from numba.cuda import types  # noqa: E402
from numba.cuda.extending import intrinsic  # noqa: E402

from grader.runner import definitions_namespace  # noqa: E402

ns = definitions_namespace(ROOT / "solutions/03_softmax/softmax.ipynb")
SIM = workbook.MODE == "sim"
ROWS = int(os.environ.get("ROWS", 49152))
res = {"device": torch.cuda.get_device_name() if not SIM else "sim", "rows": ROWS, "runs": []}


def save():
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "exp21d.json").write_text(json.dumps(res, indent=1))


def make_load(asm_text):
    if SIM:
        return ns["load4"]

    @intrinsic
    def load(typingctx, array, index):
        result_type = types.UniTuple(types.float32, 4)

        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, value=args[0]).data
            offset = context.cast(builder, args[1], sig.args[1], types.intp)
            pointer = builder.gep(data, [offset])
            f32 = ir.FloatType()
            fn = ir.FunctionType(ir.LiteralStructType([f32] * 4), [pointer.type])
            packed = builder.call(ir.InlineAsm(fn, asm_text + " {$0, $1, $2, $3}, [$4];",
                                               "=f,=f,=f,=f,l"), [pointer])
            return context.make_tuple(builder, result_type,
                                      [builder.extract_value(packed, k) for k in range(4)])

        return result_type(array, index), codegen

    return load


def make_store(asm_text):
    if SIM:
        return ns["store4"]

    @intrinsic
    def store(typingctx, array, index, a, b, c, d):
        def codegen(context, builder, sig, args):
            data = context.make_array(sig.args[0])(context, builder, value=args[0]).data
            offset = context.cast(builder, args[1], sig.args[1], types.intp)
            pointer = builder.gep(data, [offset])
            f32 = ir.FloatType()
            fn = ir.FunctionType(ir.VoidType(), [pointer.type] + [f32] * 4)
            builder.call(ir.InlineAsm(fn, asm_text + " [$0], {$1, $2, $3, $4};",
                                      "l,f,f,f,f", side_effect=True), [pointer, *args[2:]])
            return context.get_dummy_value()

        return types.none(array, index, a, b, c, d), codegen

    return store


LOADS = {"nc": "ld.global.nc.v4.f32", "nc_na": "ld.global.nc.L1::no_allocate.v4.f32",
         "lu": "ld.global.lu.v4.f32"}
STORES = {"wb": "st.global.v4.f32", "cs": "st.global.cs.v4.f32"}
red_max, red_sum = ns["warp_all_reduce_max"], ns["warp_all_reduce_sum"]
NEG_INF = ns["NEG_INF"]


def make_kernel(cols, W, R, load_kind, store_kind):
    load4, store4 = make_load(LOADS[load_kind]), make_store(STORES[store_kind])
    pack = 4
    PACKS = cols // (W * pack)
    CPT = PACKS * pack
    TILE = (32 // W) * R
    BUF = R * CPT

    @cuda.jit
    def k(x, y):
        rows = x.shape[0]
        buf = cuda.local.array(BUF, float32)
        lane = cuda.threadIdx.x % W
        first = (cuda.threadIdx.x % 32) // W * R
        tile = cuda.grid(1) // 32 * TILE
        while tile < rows:
            for r in range(R):
                row = tile + first + r
                for p in range(PACKS):
                    col = (p * W + lane) * pack
                    if row < rows:
                        a, b, c, d = load4(x[row], col)
                    else:
                        a = b = c = d = NEG_INF
                    buf[r * CPT + p * pack] = a
                    buf[r * CPT + p * pack + 1] = b
                    buf[r * CPT + p * pack + 2] = c
                    buf[r * CPT + p * pack + 3] = d
            for r in range(R):
                m = NEG_INF
                for j in range(CPT):
                    m = max(m, buf[r * CPT + j])
                m = red_max(m, W)
                s = float32(0.0)
                for j in range(CPT):
                    e = math.exp(buf[r * CPT + j] - m)
                    buf[r * CPT + j] = e
                    s += e
                s = red_sum(s, W)
                inv = float32(1.0) / s
                for j in range(CPT):
                    buf[r * CPT + j] *= inv
            for r in range(R):
                row = tile + first + r
                if row < rows:
                    for p in range(PACKS):
                        col = (p * W + lane) * pack
                        store4(y[row], col, buf[r * CPT + p * pack], buf[r * CPT + p * pack + 1],
                               buf[r * CPT + p * pack + 2], buf[r * CPT + p * pack + 3])
            tile += cuda.gridsize(1) // 32 * TILE

    return k


def loop_us(calls, seconds=0.05, repeat=5):
    for fn in calls * 3:
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for fn in calls:
        fn()
    torch.cuda.synchronize()
    once = (time.perf_counter() - t) / len(calls)
    n = max(len(calls), int(seconds / max(once, 1e-7)) // len(calls) * len(calls))
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for i in range(n):
            calls[i % len(calls)]()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) / n * 1e6)
    return float(np.median(times))


sms = 132 if SIM else cuda.get_current_device().MULTIPROCESSOR_COUNT
prepare = ns["prepare"]
for cols in [int(c) for c in os.environ.get("COLS", "64 128 32").split()]:
    gen = torch.Generator(device="cuda").manual_seed(cols)
    xs = [torch.randn(ROWS, cols, device="cuda", generator=gen) for _ in range(2)]
    dxs = [cuda.as_cuda_array(x) for x in xs]
    yt = torch.empty_like(xs[0])
    dy = cuda.as_cuda_array(yt)
    want = torch.softmax(xs[1], dim=1)
    cands = {"torch": [lambda x=x: torch.softmax(x, dim=1) for x in xs],
             "lesson softmax_gpu": [lambda x=x: ns["softmax_gpu"](x, dy) for x in dxs],
             "lesson softmax": [lambda x=x: ns["softmax"](x) for x in dxs]}
    configs = []
    for W in (8, 16, 32):
        if cols % (W * 4) or W * 4 > cols:
            continue
        for R in (1, 2, 4):
            for threads in (128, 256):
                configs.append((W, R, threads, "nc", "wb", "tiles"))
    base_W = min(32, cols // 4)
    for lk, sk in (("nc", "cs"), ("nc_na", "wb"), ("nc_na", "cs"), ("lu", "cs")):
        configs.append((base_W, 2, 128, lk, sk, "tiles"))
    for waves in (1, 2, 4):
        configs.append((base_W, 2, 128, "nc", "wb", f"persistent{waves}"))
        configs.append((base_W, 2, 128, "nc", "cs", f"persistent{waves}"))
    for W, R, threads, lk, sk, grid_kind in configs:
        try:
            kern = make_kernel(cols, W, R, lk, sk)
            rows_per_block = threads // W * R
            tiles = -(-ROWS // rows_per_block)
            if grid_kind == "tiles":
                grid = tiles
            else:
                grid = min(tiles, sms * (2048 // threads) * int(grid_kind[-1]) // 4)
            launch = prepare(kern, grid, threads, 0, (dxs[0], dy))
            launch(dxs[1], dy)
            torch.cuda.synchronize()
            torch.testing.assert_close(yt, want, atol=1e-6, rtol=1e-4)
            name = f"W{W} R{R} t{threads} {lk}/{sk} {grid_kind}"
            cands[name] = [lambda x=x, launch=launch: launch(x, dy) for x in dxs]
        except Exception as exc:  # noqa: BLE001
            res["runs"].append({"cols": cols, "config": str((W, R, threads, lk, sk, grid_kind)),
                                "error": repr(exc)[:300]})
    times = {name: [] for name in cands}
    for rnd in range(3):
        for name, calls in cands.items():
            times[name].append(loop_us(calls))
    med = {name: float(np.median(v)) for name, v in times.items()}
    for name, v in times.items():
        res["runs"].append({"cols": cols, "name": name, "us": [round(t, 2) for t in v],
                            "median": round(med[name], 2),
                            "x_torch": round(med["torch"] / med[name], 3)})
    save()
    best = sorted(med.items(), key=lambda kv: kv[1])
    print(f"cols {cols}: torch {med['torch']:.2f} lesson {med['lesson softmax_gpu']:.2f}/"
          f"{med['lesson softmax']:.2f}; best: " +
          "; ".join(f"{n} {t:.2f} ({med['torch'] / t:.3f}x)" for n, t in best[:6]), flush=True)
