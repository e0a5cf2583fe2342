"""Prototype kernels (outside the library) for few rows of x @ W.T (W [N, K] row-major: a column-major B), timed beside
tiledsl's ``schedule=None`` and cuBLAS, to decide what the GEMV emitter should do next (session 18, 2026-12-03).

A warp owns RN columns, its lanes read float4 along K; A is read row by row (one row's vector at a time: the thread
holds 4 floats of A, not 16×4) from global memory (L1) or from the block's K slice staged in shared memory (SMEM_A=1,
[m][k]); a block covers GROUPS groups of warps × RN columns, one after another, so one staged slice of A serves
GROUPS times the columns; B loads optionally evict-first (``__ldcs``, LDCS=1); the warp's BM·RN sums leave by a
reduce-scatter butterfly; K slices go to a float32 workspace summed by a second kernel. Each variant is checked
against a float64 product on a NaN-poisoned C.

Run (GPU): ``python benchmarks/gemv_colb_proto.py benchmarks/results/gemv_colb_proto_h200_2026-12-03.json``.
Measured on the H200, 2026-12-03 (``docs/gemm.md``, "A column-major B"): with 16 rows, A read row by row from L1
with evict-first B (``smem=0 ldcs=1``, unroll 1, 254 registers, no spills) 1.09–1.33× tiledsl's pick (255 registers
and spills), and the staged form with 8 groups of columns 1.11–1.21×; neither passes 0.60 of a device copy but at
128256 columns (0.69).
"""

import json
import sys

import cupy as cp
import numpy as np

import tiledsl
from tiledsl.timing import time_gpu

SRC = r"""
#define WARPS (THREADS / 32)
#define V (BM * RN)
#if LDCS
#define LDB(p) __ldcs(reinterpret_cast<const float4*>(p))
#else
#define LDB(p) __ldg(reinterpret_cast<const float4*>(p))
#endif
extern "C" __global__ void __launch_bounds__(THREADS, MINB) colb(const float* __restrict__ A,
    const float* __restrict__ Wt, float* __restrict__ P, int M, int N, int K, int lda, int ldw, int depth)
{
  const int k_begin = blockIdx.y * depth;
  const int n_k = min(K, k_begin + depth) - k_begin;
  const int row0 = blockIdx.z * BM;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#if SMEM_A
  extern __shared__ float4 as4[];
  const int dq = depth / 4;
  for (int i = threadIdx.x; i < BM * (n_k / 4); i += THREADS) {
    const int m = i / (n_k / 4), kv = i % (n_k / 4), gm = row0 + m;
    as4[m * dq + kv] = gm < M ? *reinterpret_cast<const float4*>(A + (long long)gm * lda + k_begin + 4 * kv)
                              : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  __syncthreads();
#else
  const float* ap[BM];
  #pragma unroll
  for (int m = 0; m < BM; ++m) ap[m] = A + (long long)min(row0 + m, M - 1) * lda + k_begin;
#endif
  for (int g = 0; g < GROUPS; ++g) {
  const int gn0 = ((blockIdx.x * GROUPS + g) * WARPS + warp) * RN;
  if (gn0 >= N) break;
  const float* wp[RN];
  #pragma unroll
  for (int c = 0; c < RN; ++c) wp[c] = Wt + (long long)min(gn0 + c, N - 1) * ldw + k_begin;
  float acc[V];
  #pragma unroll
  for (int i = 0; i < V; ++i) acc[i] = 0.f;
  #pragma unroll UNROLL
  for (int kk = lane * 4; kk < n_k; kk += 128) {
    float4 b[RN];
    #pragma unroll
    for (int c = 0; c < RN; ++c) b[c] = LDB(wp[c] + kk);
    #pragma unroll
    for (int m = 0; m < BM; ++m) {
#if SMEM_A
      const float4 a = as4[m * dq + kk / 4];
#else
      const float4 a = __ldg(reinterpret_cast<const float4*>(ap[m] + kk));
#endif
      #pragma unroll
      for (int c = 0; c < RN; ++c) {
        float s = acc[m * RN + c];
        s = fmaf(a.x, b[c].x, s); s = fmaf(a.y, b[c].y, s); s = fmaf(a.z, b[c].z, s); s = fmaf(a.w, b[c].w, s);
        acc[m * RN + c] = s;
      }
    }
  }
#if RED
  // reduce-scatter butterfly: after 5 halvings lane L holds the full sums of entries L*(V/32) .. +V/32-1
  #pragma unroll
  for (int i = 0; i < (V / 2); ++i) {
    const bool upper = lane & 16;
    const float send = upper ? acc[i] : acc[i + (V / 2)], keep = upper ? acc[i + (V / 2)] : acc[i];
    acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, 16);
  }
  #pragma unroll
  for (int i = 0; i < (V / 4); ++i) {
    const bool upper = lane & 8;
    const float send = upper ? acc[i] : acc[i + (V / 4)], keep = upper ? acc[i + (V / 4)] : acc[i];
    acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, 8);
  }
  #pragma unroll
  for (int i = 0; i < (V / 8); ++i) {
    const bool upper = lane & 4;
    const float send = upper ? acc[i] : acc[i + (V / 8)], keep = upper ? acc[i + (V / 8)] : acc[i];
    acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, 4);
  }
  #pragma unroll
  for (int i = 0; i < (V / 16); ++i) {
    const bool upper = lane & 2;
    const float send = upper ? acc[i] : acc[i + (V / 16)], keep = upper ? acc[i + (V / 16)] : acc[i];
    acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, 2);
  }
  #pragma unroll
  for (int i = 0; i < (V / 32); ++i) {
    const bool upper = lane & 1;
    const float send = upper ? acc[i] : acc[i + (V / 32)], keep = upper ? acc[i + (V / 32)] : acc[i];
    acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, 1);
  }
  #pragma unroll
  for (int j = 0; j < V / 32; ++j) {
    const int e = lane * (V / 32) + j, gm = row0 + e / RN, gn = gn0 + e % RN;
    if (gm < M && gn < N) P[((long long)blockIdx.y * M + gm) * N + gn] = acc[j];
  }
#else
  #pragma unroll
  for (int e = 0; e < V; ++e) {
    float v = acc[e];
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    const int gm = row0 + e / RN, gn = gn0 + e % RN;
    if (lane == 0 && gm < M && gn < N) P[((long long)blockIdx.y * M + gm) * N + gn] = v;
  }
#endif
  }
}

extern "C" __global__ void splitk_sum(const float* __restrict__ W, float* __restrict__ C, int MN4, int split)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= MN4) return;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int z = 0; z < split; ++z) {
    const float4 v = __ldcs(reinterpret_cast<const float4*>(W) + (long long)z * MN4 + i);
    s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
  }
  reinterpret_cast<float4*>(C)[i] = s;
}
"""

_MODS = {}
KEYS = ("smem", "rn", "unroll", "threads", "depth", "red", "ldcs", "minb", "bps", "groups")


def module(bm, v):
    key = (bm, v["smem"], v["rn"], v["unroll"], v["threads"], v["red"], v["ldcs"], v["minb"], v["groups"])
    if key not in _MODS:
        opts = ("-std=c++17", f"-DBM={bm}", f"-DSMEM_A={v['smem']}", f"-DRN={v['rn']}", f"-DUNROLL={v['unroll']}",
                f"-DTHREADS={v['threads']}", f"-DRED={v['red']}", f"-DLDCS={v['ldcs']}", f"-DMINB={v['minb']}", f"-DGROUPS={v['groups']}")
        _MODS[key] = cp.RawModule(code=SRC, options=opts)
    return _MODS[key]


def proto_fn(a, w, c, bm, v):
    m, k = a.shape
    n = w.shape[0]
    mod = module(bm, v)
    kern, red = mod.get_function("colb"), mod.get_function("splitk_sum")
    col_blocks = -(-n // (v["threads"] // 32 * v["rn"] * v["groups"]))
    depth = v["depth"]
    if not depth:  # about bps blocks per SM
        split = max(1, min(64, -(-v["bps"] * 132 // col_blocks), k // 128))
        depth = -(-k // split)
    depth = -(-depth // 128) * 128
    split = -(-k // depth)
    smem = depth * bm * 4 if v["smem"] else 0
    if smem > 48 * 1024:
        kern.max_dynamic_shared_size_bytes = smem
    ws = cp.empty((split, m, n), dtype=cp.float32) if split > 1 else c
    rows = -(-m // bm)
    mn4 = m * n // 4
    args = (a, w, ws, np.int32(m), np.int32(n), np.int32(k), np.int32(k), np.int32(k), np.int32(depth))

    def run():
        kern((col_blocks, split, rows), (v["threads"],), args, shared_mem=smem)
        if split > 1:
            red((-(-mn4 // 256),), (256,), (ws, c, np.int32(mn4), np.int32(split)))
    return run, dict(split=split, depth=depth, smem=smem, blocks=col_blocks * split * rows,
                     regs=kern.num_regs, lmem=kern.local_size_bytes)


def V(**kw):
    d = dict(smem=1, rn=4, unroll=1, threads=128, depth=512, red=1, ldcs=0, minb=4, bps=4, groups=1)
    d.update(kw)
    return d


VARIANTS = {
    16: [V(groups=1), V(groups=4), V(groups=8), V(groups=16), V(groups=8, depth=256), V(groups=8, depth=768),
         V(groups=8, ldcs=1), V(groups=8, unroll=2, minb=3), V(groups=4, depth=0), V(groups=8, threads=256, minb=2),
         V(smem=0, unroll=1, depth=0, minb=1), V(smem=0, unroll=1, depth=0, minb=1, ldcs=1)],
    8: [V(groups=1), V(groups=8), V(groups=8, unroll=2, minb=3), V(groups=16)],
}


def main():
    shapes = [(16, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336), (16, 28672, 4096), (16, 128256, 4096),
              (16, 11008, 4096), (16, 1024, 4096), (12, 14336, 4096), (8, 14336, 4096), (8, 4096, 14336)]
    x = cp.empty(1 << 28, dtype=cp.float32)
    y = cp.empty_like(x)
    t = time_gpu(lambda: cp.copyto(y, x), repeat=10)  # noqa: F821 (x, y deleted after this line)
    copy_gbps = 2 * x.nbytes / t.median_ms / 1e6
    del x, y
    print(f"copy {copy_gbps:.0f} GB/s", flush=True)
    out = []
    rng = cp.random.default_rng(1)
    for m, n, k in shapes:
        a = rng.standard_normal((m, k), dtype=cp.float32)
        w = rng.standard_normal((n, k), dtype=cp.float32)
        ref = a.astype(cp.float64) @ w.T.astype(cp.float64)
        tol = 4e-5 * np.sqrt(k)
        nbytes = 4 * (m * k + k * n + m * n)
        c = cp.full((m, n), cp.nan, dtype=cp.float32)
        tc = time_gpu(lambda a=a, w=w, c=c: cp.matmul(a, w.T, out=c), repeat=15).median_ms
        tiledsl.gemm(a, w.T, c)
        tt = time_gpu(lambda a=a, w=w, c=c: tiledsl.gemm(a, w.T, c), repeat=15).median_ms
        print(f"{m}x{n}x{k}: cublas {tc*1e3:.1f}us ({nbytes/tc/1e6/copy_gbps:.2f}) tiledsl {tt*1e3:.1f}us "
              f"({nbytes/tt/1e6/copy_gbps:.2f})", flush=True)
        bm = 16 if m > 8 else 8
        for v in VARIANTS[bm]:
            try:
                fn, info = proto_fn(a, w, c, bm, v)
                c.fill(cp.nan)
                fn()
                cp.cuda.Device().synchronize()
                err = float(cp.max(cp.abs(c - ref)) / cp.max(cp.abs(ref)))
                tp = time_gpu(fn, repeat=15).median_ms
                frac = nbytes / tp / 1e6 / copy_gbps
                tag = " ".join(f"{kk}={v[kk]}" for kk in KEYS)
                print(f"   {tag}: {tp*1e3:.1f}us frac {frac:.2f} x_tiledsl {tt/tp:.2f} x_cublas {tc/tp:.2f} "
                      f"ok {err < tol} {info}", flush=True)
                out.append(dict(m=m, n=n, k=k, v=v, ms=tp, tiledsl=tt, cublas=tc, frac=frac, ok=bool(err < tol),
                                **info))
            except Exception as e:  # noqa
                print(f"   {v}: FAIL {type(e).__name__}: {str(e)[:300]}", flush=True)
    json.dump(dict(copy=copy_gbps, rows=out), open(sys.argv[1], "w"))


if __name__ == "__main__":
    main()
