"""Prototype kernel (outside the library) for few rows of x @ W.T (W [N, K] row-major: a column-major B) that reads B
the way the x @ W kernel does, timed beside tiledsl's ``schedule=None`` and cuBLAS, to decide whether the GEMV
emitter should take it (session 26, 2026-12-04). Measured the same day: the best variant per product 0.82× tiledsl
(geomean over ten products), not taken (docs/gemm.md, "Three prototypes measured, none taken").

Why: the column-major-B kernel spreads K across a warp's lanes, so every lane needs its own piece of each of the BM
rows of A per step: with sixteen rows a warp issues 16 non-broadcast 16-byte loads of A (4 L1 wavefronts each) per 4
of B, 80 wavefronts per 2 KiB of B, where the x @ W kernel issues 8 (A read as shared-memory broadcasts). Here a
warp owns 128 columns (lane l: columns l, l + 32, l + 64, l + 96) and copies its columns' next KT elements of K into
its own ring of shared memory with ``cp.async`` (16-byte pieces, STAGES chunks in flight, no registers held), each
column a row of KT + 4 floats (the 4 of padding make the lanes' 16-byte reads of one k-quad conflict-free); the
block's K slice of A is staged once, transposed (At[k][m]), and read as broadcasts. Per k-quad a lane reads 4
vectors of B and 16 of A for 256 FMAs, as x @ W does; partial sums stay in the lane (no shuffles), and the K slices
go to a float32 workspace summed by a second kernel. Each variant is checked against a float64 product on a
NaN-poisoned C and timed with ``tiledsl.timing.time_gpu(gpu_only=True)``, as are tiledsl's pick and cuBLAS.

Run (GPU): ``python benchmarks/gemv_nt_staged_proto.py --out benchmarks/results/gemv_nt_staged_proto_h200.json``.
``--compile-only`` compiles every variant with NVRTC (no GPU) and prints registers and spills.
"""

from __future__ import annotations

import numpy as np
from proto_sweep import STAGE_A_TRANSPOSED, blocks_per_sm, compile_variants, prototype_main, sm_count, sweep

SRC = STAGE_A_TRANSPOSED + r"""
#define WARPS (THREADS / 32)
#define COLS_W 128               // columns per warp: lane l owns l, l + 32, l + 64, l + 96
#define ROW (KT + 4)             // floats per staged column: KT of K and 4 of padding
#define RING (COLS_W * ROW)      // floats per stage of a warp's ring

__device__ __forceinline__ void cp_async16(float* dst, const float* src)
{
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N)); }

extern "C" __global__ void __launch_bounds__(THREADS, MINB) nt_staged(const float* __restrict__ A,
    const float* __restrict__ W, float* __restrict__ P, int M, int N, int K, int depth)
{
  extern __shared__ __align__(16) float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int k_begin = blockIdx.y * depth;
  const int n_k = min(K - k_begin, depth);            // a multiple of KT (K and depth are)
  const int row0 = blockIdx.z * BM;
  const int col0 = (blockIdx.x * WARPS + warp) * COLS_W;
  float* const at = smem;                             // At[k - k_begin][BM]
  float* const ring = smem + depth * BM + warp * STAGES * RING;  // this warp's [STAGES][COLS_W][ROW]
  const int chunks = n_k / KT;

  // ---- one chunk of this warp's columns: 128 * KT / 4 pieces of 16 bytes, KT per lane ----
  auto issue = [&](int c) {
    float* const dst = ring + (c % STAGES) * RING;
    const long long k0 = (long long)k_begin + c * KT;
    #pragma unroll
    for (int i = 0; i < KT; ++i) {
      const int p = lane + 32 * i, col = p / (KT / 4), q = p % (KT / 4);
      const int gn = min(col0 + col, N - 1);          // columns past N: any valid one, never stored
      cp_async16(dst + col * ROW + 4 * q, W + (long long)gn * K + k0 + 4 * q);
    }
  };
  #pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < chunks) issue(s);
    cp_async_commit();
  }

  // ---- stage the block's K slice of A transposed, rows past M as zeros ----
  stage_a_transposed(at, A, M, K, row0, k_begin, n_k);
  __syncthreads();

  float acc[BM][4];
  #pragma unroll
  for (int m = 0; m < BM; ++m)
    #pragma unroll
    for (int g = 0; g < 4; ++g) acc[m][g] = 0.f;

  for (int c = 0; c < chunks; ++c) {
    if (c + STAGES - 1 < chunks) issue(c + STAGES - 1);  // refills the stage read in iteration c - 1
    cp_async_commit();
    cp_async_wait<STAGES - 1>();                          // this lane's pieces of chunk c have landed
    __syncwarp();                                         // and every lane's
    const float* const b = ring + (c % STAGES) * RING;
    #pragma unroll
    for (int kq = 0; kq < KT / 4; ++kq) {
      float4 bv[4];
      #pragma unroll
      for (int g = 0; g < 4; ++g) bv[g] = *reinterpret_cast<const float4*>(b + (lane + 32 * g) * ROW + 4 * kq);
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const float4* const a4 = reinterpret_cast<const float4*>(at + (c * KT + 4 * kq + kk) * BM);
        #pragma unroll
        for (int q = 0; q < BM / 4; ++q) {
          const float4 a = a4[q];                          // rows 4q..4q+3 at this k: one broadcast
          const float ar[4] = {a.x, a.y, a.z, a.w};
          #pragma unroll
          for (int r = 0; r < 4; ++r)
            #pragma unroll
            for (int g = 0; g < 4; ++g) {
              const float bk = kk == 0 ? bv[g].x : kk == 1 ? bv[g].y : kk == 2 ? bv[g].z : bv[g].w;
              acc[4 * q + r][g] = fmaf(ar[r], bk, acc[4 * q + r][g]);
            }
        }
      }
    }
    __syncwarp();                                         // all lanes done with this stage before its refill
  }

  // ---- this slice's partial sums: lane l's columns are consecutive across the warp (coalesced) ----
  #pragma unroll
  for (int m = 0; m < BM; ++m) {
    const int gm = row0 + m;
    if (gm >= M) break;
    #pragma unroll
    for (int g = 0; g < 4; ++g) {
      const int gn = col0 + lane + 32 * g;
      if (gn < N) P[((long long)blockIdx.y * M + gm) * N + gn] = acc[m][g];
    }
  }
}

extern "C" __global__ void splitk_sum(const float* __restrict__ P, float* __restrict__ C, int MN, int split)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= MN) return;
  float s = 0.f;
  for (int z = 0; z < split; ++z) s += __ldcs(P + (long long)z * MN + i);
  C[i] = s;
}
"""

KEYS = ("threads", "kt", "stages", "depth", "dcap", "minb", "bps")


def V(**kw) -> dict:
    """A variant: threads per block, KT (K per chunk), STAGES (chunks in a warp's ring), depth (K slice; 0: slices
    for about one wave of the blocks an SM holds, at most ``dcap`` deep), MINB (``__launch_bounds__`` blocks per SM);
    ``bps`` is the blocks per SM the variant was meant for, kept for the record (what fits decides)."""
    d = dict(threads=128, kt=8, stages=3, depth=0, dcap=512, minb=2, bps=2)
    d.update(kw)
    return d


VARIANTS = [V(), V(stages=2), V(stages=4), V(kt=16, stages=2), V(kt=16, stages=3, minb=1), V(threads=64, minb=4, bps=4),
            V(threads=64, stages=4, minb=3, bps=3), V(dcap=256, bps=3, minb=3, stages=2),
            V(threads=256, stages=2, dcap=256, minb=2), V(threads=256, stages=3, dcap=256, minb=1, bps=1),
            V(threads=256, stages=2, dcap=128, minb=2, bps=4)]


def options(bm: int, v: dict) -> tuple[str, ...]:
    return ("-std=c++17", f"-DBM={bm}", f"-DTHREADS={v['threads']}", f"-DKT={v['kt']}", f"-DSTAGES={v['stages']}",
            f"-DMINB={v['minb']}")


def smem_bytes(bm: int, v: dict, depth: int) -> int:
    return 4 * (depth * bm + v["threads"] // 32 * v["stages"] * 128 * (v["kt"] + 4))


def compile_only() -> int:
    return compile_variants("nt_staged", SRC, VARIANTS, KEYS, options, lambda bm, v: (
        f", smem at depth {v['depth'] or v['dcap']} {smem_bytes(bm, v, v['depth'] or v['dcap'])} B"))


def main() -> int:
    return prototype_main(__doc__, "benchmarks/results/gemv_nt_staged_proto_h200.json", compile_only, run)


def run(out: str) -> int:
    """The sweep (:func:`proto_sweep.sweep`) of :data:`VARIANTS` over a few x @ W.T products, written to ``out``."""
    import cupy as cp

    mods: dict = {}

    def proto(a, b, c, bm, v):
        m, k = a.shape
        w = b.T  # W [N, K] row-major: B is its transposed view
        n = w.shape[0]
        if k % 128:
            raise ValueError(f"K = {k}: the prototype wants K a multiple of 128 (slices of whole 128-deep steps)")
        key = options(bm, v)
        if key not in mods:
            mods[key] = cp.RawModule(code=SRC, options=key)
        kern, red = mods[key].get_function("nt_staged"), mods[key].get_function("splitk_sum")
        col_blocks = -(-n // (v["threads"] // 32 * 128))
        # the slices fill about one wave of what fits at the deepest slice, not bps
        per_sm, sms = blocks_per_sm(v["threads"], kern.num_regs, smem_bytes(bm, v, v["depth"] or v["dcap"])), sm_count()
        depth = v["depth"] or min(v["dcap"], -(-k // max(1, min(64, -(-per_sm * sms // col_blocks), k // 128))))
        depth = -(-depth // 128) * 128
        split = -(-k // depth)
        smem = smem_bytes(bm, v, depth)
        kern.max_dynamic_shared_size_bytes = smem
        ws = cp.full((split, m, n), cp.nan, dtype=cp.float32) if split > 1 else c  # unwritten partials stay NaN
        args = (a, w, ws, np.int32(m), np.int32(n), np.int32(k), np.int32(depth))

        def run():
            kern((col_blocks, split, -(-m // bm)), (v["threads"],), args, shared_mem=smem)
            if split > 1:
                red((-(-(m * n) // 256),), (256,), (ws, c, np.int32(m * n), np.int32(split)))
        blocks = col_blocks * split * -(-m // bm)
        return run, dict(split=split, depth=depth, smem=smem, regs=kern.num_regs, lmem=kern.local_size_bytes,
                         blocks_per_sm=per_sm, waves=blocks / (per_sm * sms))

    shapes = [(16, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336), (16, 28672, 4096), (16, 128256, 4096),
              (16, 11008, 4096), (12, 14336, 4096), (8, 14336, 4096), (8, 4096, 14336), (16, 1024, 4096)]
    return sweep("benchmarks/gemv_nt_staged_proto.py", out, shapes,
                 lambda rng, n, k: rng.standard_normal((n, k), dtype=cp.float32).T, VARIANTS, KEYS, proto)


if __name__ == "__main__":
    raise SystemExit(main())
