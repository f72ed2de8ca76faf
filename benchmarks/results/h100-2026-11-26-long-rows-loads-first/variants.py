"""softmax f16 32768 variants, LN f16 2048 variants (H100)."""
import json, math, os, sys
from pathlib import Path
import numpy as np
OUT = Path(os.environ.get("OUT", "/tmp/out"))
ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))
import workbook  # noqa
import torch
from numba import cuda, float32
from numba.types import float16
from grader.runner import definitions_namespace
from workbook.occupancy import max_active_blocks
part = sys.argv[1]
res = {}
def save():
    (OUT / f"variants-{part}.json").write_text(json.dumps(res, indent=1))
def ev_us(fn, inner=10, reps=7):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner): fn()
        b.record(); torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / inner)
    return float(np.median(ts)) * 1e3
def regs(k):
    try:
        return next(iter(k.overloads.values())).regs_per_thread
    except Exception as e:
        return repr(e)[:60]
sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
torch.cuda.init()
if part == "softmax":
    ns = definitions_namespace(ROOT / "solutions/03_softmax/softmax.ipynb")
    NEG_INF = ns["NEG_INF"]; bmax = ns["block_all_reduce_max"]; bsum = ns["block_all_reduce_sum"]
    load_pack, store_pack = ns["make_pack_io"](np.float16, 8)
    PACK = 8
    def make_unc(U):
        N = U * PACK
        @cuda.jit
        def k(x, y):
            rows, cols = x.shape
            values = cuda.local.array(N, float32)
            tid, threads = cuda.threadIdx.x, cuda.blockDim.x
            num_packs = cols // PACK
            row = cuda.blockIdx.x
            while row < rows:
                m = NEG_INF
                s = float32(0.0)
                for first in range(tid, num_packs, U * threads):
                    for u in range(U):
                        p = first + u * threads
                        if p < num_packs:
                            load_pack(x[row], p * PACK, values, u * PACK)
                    for u in range(U):
                        p = first + u * threads
                        if p < num_packs:
                            pm = values[u * PACK]
                            for i in range(1, PACK):
                                pm = max(pm, values[u * PACK + i])
                            if pm > m:
                                s *= math.exp(m - pm)
                                m = pm
                            for i in range(PACK):
                                s += math.exp(values[u * PACK + i] - m)
                row_max = bmax(m)
                s *= math.exp(m - row_max)
                s = bsum(s)
                scale = float32(1.0) / s
                for first in range(tid, num_packs, U * threads):
                    for u in range(U):
                        p = first + u * threads
                        if p < num_packs:
                            load_pack(x[row], p * PACK, values, u * PACK)
                    for u in range(U):
                        p = first + u * threads
                        if p < num_packs:
                            for i in range(PACK):
                                values[u * PACK + i] = math.exp(values[u * PACK + i] - row_max) * scale
                            store_pack(y[row], p * PACK, values, u * PACK)
                row += cuda.gridDim.x
        return k
    @cuda.jit
    def smem_half(x, y):
        rows, cols = x.shape
        cache = cuda.shared.array(0, float16)
        values = cuda.local.array(PACK, float32)
        tid, threads = cuda.threadIdx.x, cuda.blockDim.x
        num_packs = cols // PACK
        row = cuda.blockIdx.x
        while row < rows:
            m = NEG_INF
            s = float32(0.0)
            for p in range(tid, num_packs, threads):
                load_pack(x[row], p * PACK, values, 0)
                pm = values[0]
                for i in range(PACK):
                    cache[i * num_packs + p] = float16(values[i])
                    pm = max(pm, values[i])
                if pm > m:
                    s *= math.exp(m - pm)
                    m = pm
                for i in range(PACK):
                    s += math.exp(values[i] - m)
            row_max = bmax(m)
            s *= math.exp(m - row_max)
            s = bsum(s)
            scale = float32(1.0) / s
            for p in range(tid, num_packs, threads):
                for i in range(PACK):
                    values[i] = math.exp(float32(cache[i * num_packs + p]) - row_max) * scale
                store_pack(y[row], p * PACK, values, 0)
            cuda.syncthreads()
            row += cuda.gridDim.x
    for rows in (49152, 3072):
        cols = 32768
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)
        dx, dy = cuda.as_cuda_array(x), cuda.as_cuda_array(y)
        want = torch.softmax(x, 1)
        r = {"torch": ev_us(lambda: torch.softmax(x, 1))}
        print(rows, "torch", r["torch"], flush=True)
        base = ns["make_block_uncached_softmax"](np.float16, 8, False)
        cands = [("lesson uncached", base, 0)] + [(f"uncached U{U}", make_unc(U), 0) for U in (2, 4)] + [("smem half", smem_half, cols * 2)]
        for name, kern, shared in cands:
            for threads in (256, 512, 1024):
                key = f"{name} t{threads}"
                try:
                    occ = max_active_blocks(kern, threads, shared, (dx, dy))
                    f = lambda: kern[rows, threads, 0, shared](dx, dy)
                    f(); torch.cuda.synchronize()
                    ok = bool(torch.allclose(y.float(), want.float(), atol=1e-4, rtol=1e-2))
                    r[key] = [ev_us(f), regs(kern), occ, ok]
                except Exception as e:
                    r[key] = repr(e)[:300]
                print(rows, key, r[key], flush=True)
        res[rows] = r; save()
        del x, y, want, dx, dy; torch.cuda.empty_cache()
if part == "layernorm":
    ns = definitions_namespace(ROOT / "solutions/04_layernorm/layernorm.ipynb")
    pack, load_pack, store_pack = ns["PACKS"][np.dtype(np.float16)]
    wpu = ns["welford_pack_update"]; wred = ns["lib_warp_allreduce"]
    def make_warp_unc(packs_per_thread):
        @cuda.jit
        def k(x, gamma, beta, affine, eps, y, mean, rstd, cols):
            rows = mean.shape[0]
            buf = cuda.local.array(8, float32)
            lane = cuda.threadIdx.x % 32
            row = cuda.grid(1) // 32
            step = cuda.gridsize(1) // 32
            while row < rows:
                m = m2 = n = float32(0.0)
                for p in range(packs_per_thread):
                    col = (p * 32 + lane) * 8
                    if col < cols:
                        v = load_pack(x, row * cols + col)
                        for q in range(8):
                            buf[q] = v[q]
                        m, m2, n = wpu(m, m2, n, buf, 0, 8)
                m, m2, n = wred(m, m2, n, 32)
                inv_std = float32(1.0) / math.sqrt(m2 / n + eps)
                if lane == 0:
                    mean[row] = m
                    rstd[row] = inv_std
                for p in range(packs_per_thread):
                    col = (p * 32 + lane) * 8
                    if col < cols:
                        v = load_pack(x, row * cols + col)
                        for q in range(8):
                            buf[q] = (v[q] - m) * inv_std
                        if affine:
                            g = load_pack(gamma, col)
                            b = load_pack(beta, col)
                            for q in range(8):
                                buf[q] = buf[q] * g[q] + b[q]
                        store_pack(y, row * cols + col, buf, 0)
                row += step
        return k
    def make_warp_batched(packs_per_thread, B):
        N = 8 * B
        groups = packs_per_thread // B
        @cuda.jit
        def k(x, gamma, beta, affine, eps, y, mean, rstd, cols):
            rows = mean.shape[0]
            buf = cuda.local.array(N, float32)
            lane = cuda.threadIdx.x % 32
            row = cuda.grid(1) // 32
            step = cuda.gridsize(1) // 32
            while row < rows:
                m = m2 = n = float32(0.0)
                for gi in range(groups):
                    for u in range(B):
                        col = ((gi * B + u) * 32 + lane) * 8
                        v = load_pack(x, row * cols + col)
                        for q in range(8):
                            buf[u * 8 + q] = v[q]
                    for u in range(B):
                        m, m2, n = wpu(m, m2, n, buf, u * 8, 8)
                m, m2, n = wred(m, m2, n, 32)
                inv_std = float32(1.0) / math.sqrt(m2 / n + eps)
                if lane == 0:
                    mean[row] = m
                    rstd[row] = inv_std
                for gi in range(groups):
                    for u in range(B):
                        col = ((gi * B + u) * 32 + lane) * 8
                        v = load_pack(x, row * cols + col)
                        for q in range(8):
                            buf[u * 8 + q] = (v[q] - m) * inv_std
                    for u in range(B):
                        col = ((gi * B + u) * 32 + lane) * 8
                        if affine:
                            g = load_pack(gamma, col)
                            b = load_pack(beta, col)
                            for q in range(8):
                                buf[u * 8 + q] = buf[u * 8 + q] * g[q] + b[q]
                        store_pack(y, row * cols + col, buf, u * 8)
                row += step
        return k
    for rows, cols in ((49152, 2048), (49152, 1024)):
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        g = torch.randn(cols, device="cuda", dtype=torch.float16); b = torch.randn(cols, device="cuda", dtype=torch.float16)
        F = torch.nn.functional
        want = F.layer_norm(x, (cols,), g, b, 1e-5)
        r = {"torch": ev_us(lambda: F.layer_norm(x, (cols,), g, b, 1e-5))}
        lnp = ns["layer_norm_packed"]
        dx, dg, dbb = (cuda.as_cuda_array(t) for t in (x, g, b))
        r["layer_norm_packed"] = ev_us(lambda: lnp(dx, dg, dbb))
        yk, mk, rk = lnp(dx, dg, dbb)
        flat = ns["flat"]
        args = (flat(dx), dg, dbb, True, np.float32(1e-5), flat(yk), mk, rk, cols)
        kind, kernel, grid, block, shm = ns["plan_layer_norm_packed"](args)
        r["plan"] = [kind, grid, block, shm, regs(kernel)]
        print(rows, cols, r, flush=True)
        def trial(name, k, grid, block, shared=0):
            try:
                f = lambda: k[grid, block, 0, shared](*args)
                f(); torch.cuda.synchronize()
                ok = bool(torch.allclose(torch.as_tensor(yk, device="cuda").float(), want.float(), atol=2e-2, rtol=2e-2))
                r[name] = [ev_us(f), regs(k), max_active_blocks(k, block, shared, args), grid, block, ok]
            except Exception as e:
                r[name] = repr(e)[:300]
            print(rows, cols, name, r[name], flush=True)
        trial("warp (plan)", kernel, grid, block)
        for mr in (88, 96):
            trial(f"warp maxreg{mr}", cuda.jit(max_registers=mr)(kernel.py_func), -(-rows // 4), 128)
        ppt = -(-cols // (32 * pack))
        wu = make_warp_unc(ppt)
        for t in (128, 256):
            trial(f"warp uncached t{t}", wu, -(-rows // (t // 32)), t)
            rb = max(1, max_active_blocks(wu, t, 0, args))
            trial(f"warp uncached t{t} resident x2", wu, 2 * rb * sms, t)
        for B in (2, 4, 8):
            if ppt % B == 0:
                wb = make_warp_batched(ppt, B)
                trial(f"warp batched B{B} t128", wb, -(-rows // 4), 128)
                trial(f"warp batched B{B} t128 maxreg64", cuda.jit(max_registers=64)(wb.py_func), -(-rows // 4), 128)
        res[f"{rows}x{cols}"] = r; save()
        del x, want; torch.cuda.empty_cache()
print("done", flush=True)
