"""Prototype kernels (outside the library) for 8–16 rows of x @ W (row-major A and B), timed beside tiledsl's
``schedule=None`` and cuBLAS, to test two changes to the GEMV kernel's staged form (session 26, 2026-12-04). Measured
the same day: the cluster sum 0.99× the workspace sum, A a step ahead 0.91×; not taken (docs/gemm.md).

The library's kernel for these products (``smem_a``: A's K slice staged transposed in shared memory, a register ring
of ``unroll`` 16-byte loads of B per thread, 4 columns per thread, K slices summed by a second kernel) stands at
0.60–0.77 of a device copy with sixteen rows, where eight rows reach 0.97–1.00 on the largest product. Two guesses
at what holds it, each a switch here:

* ``PIPE_A=1``: the four 16-byte broadcasts of A for step k + 1 are loaded while step k's 64 FMAs run (16 more
  registers), so no step waits for shared memory;
* ``CLUSTER=1``: the K slices of a group of columns form a thread-block cluster (``__cluster_dims__(1, SPLIT, 1)``,
  sm_90) and are summed through distributed shared memory: each block leaves its partial sums in its own shared
  memory, and after a cluster barrier block r adds every block's sums of its share of the rows, in slice order
  (deterministic: the split-K kernel's order), and writes C. No workspace, no second launch. SPLIT ≤ 8 (portable
  cluster size), so a narrow product (N = 4096: 8 blocks of 512 columns per slice) gets well under one wave; each
  row records its blocks per SM and waves, and such rows say little about CLUSTER itself.

``CLUSTER=0`` writes the partial sums to a float32 workspace summed by ``splitk_sum`` in slice order, as the library
does. Each variant is checked against a float64 product on a NaN-poisoned C (and workspace) and timed with
``tiledsl.timing.time_gpu(gpu_only=True)``, as are tiledsl's pick and cuBLAS.

Run (GPU): ``python benchmarks/gemv_nn_cluster_proto.py --out benchmarks/results/gemv_nn_cluster_proto_h200.json``.
``--compile-only`` compiles every variant with NVRTC for sm_90 (no GPU) and prints registers and spills.
"""

from __future__ import annotations

from proto_sweep import STAGE_A_TRANSPOSED, blocks_per_sm, compile_variants, prototype_main, sm_count, sweep

SRC = STAGE_A_TRANSPOSED + r"""
#define VB 4                               // columns per thread: one 16-byte load of B per k
#define COLS (THREADS * VB)                // columns per block

__device__ __forceinline__ unsigned cluster_rank()
{
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync()
{
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float4 load_from_rank(const float4* p, unsigned rank)
{
  const unsigned local = static_cast<unsigned>(__cvta_generic_to_shared(p));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(remote) : "memory");
  return v;
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
#if CLUSTER
__cluster_dims__(1, SPLIT, 1)
#endif
nn_rows(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, float* __restrict__ P,
        int M, int N, int K, int depth)
{
  extern __shared__ __align__(16) float smem[];
  const int k_begin = blockIdx.y * depth;
  const int n_k = min(K - k_begin, depth);            // a multiple of 4 (K and depth are)
  const int row0 = blockIdx.z * BM;
  const int gn = (blockIdx.x * THREADS + threadIdx.x) * VB;
  const float* const b_col = B + (long long)k_begin * N + (gn < N ? gn : N - VB);  // past N: the last VB columns
  float* const at = smem;                             // At[k - k_begin][BM]

  // ---- the ring's first UNROLL rows of B, then A's slice staged transposed (rows past M as zeros) ----
  float4 ring[UNROLL];
  #pragma unroll
  for (int u = 0; u < UNROLL; ++u)
    ring[u] = u < n_k ? *reinterpret_cast<const float4*>(b_col + (long long)u * N) : make_float4(0.f, 0.f, 0.f, 0.f);
  stage_a_transposed(at, A, M, K, row0, k_begin, n_k);
  __syncthreads();

  float acc[BM][VB];
  #pragma unroll
  for (int m = 0; m < BM; ++m)
    #pragma unroll
    for (int j = 0; j < VB; ++j) acc[m][j] = 0.f;
  const float4* const at4 = reinterpret_cast<const float4*>(at);
#if PIPE_A
  float4 a_next[BM / 4];
  #pragma unroll
  for (int q = 0; q < BM / 4; ++q) a_next[q] = at4[q];
#endif
  for (int k0 = 0; k0 < n_k; k0 += UNROLL) {
    #pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const float4 bv = ring[u];
      if (k0 + u + UNROLL < n_k) ring[u] = *reinterpret_cast<const float4*>(b_col + (long long)(k0 + u + UNROLL) * N);
      if (k0 + u < n_k) {
        const float b[VB] = {bv.x, bv.y, bv.z, bv.w};
        float4 a[BM / 4];
#if PIPE_A
        #pragma unroll
        for (int q = 0; q < BM / 4; ++q) a[q] = a_next[q];
        if (k0 + u + 1 < n_k) {                       // step k + 1's rows of A, loaded while step k computes
          #pragma unroll
          for (int q = 0; q < BM / 4; ++q) a_next[q] = at4[(k0 + u + 1) * (BM / 4) + q];
        }
#else
        #pragma unroll
        for (int q = 0; q < BM / 4; ++q) a[q] = at4[(k0 + u) * (BM / 4) + q];
#endif
        #pragma unroll
        for (int q = 0; q < BM / 4; ++q) {
          const float ar[4] = {a[q].x, a[q].y, a[q].z, a[q].w};
          #pragma unroll
          for (int r = 0; r < 4; ++r)
            #pragma unroll
            for (int j = 0; j < VB; ++j) acc[4 * q + r][j] = fmaf(ar[r], b[j], acc[4 * q + r][j]);
        }
      }
    }
  }

#if CLUSTER
  // ---- the slices of this group of columns sum through distributed shared memory ----
  __syncthreads();                                    // every thread done with At: its space takes the partials
  float4* const red = reinterpret_cast<float4*>(smem);  // red[m][THREADS]: row m, this thread's 4 columns
  #pragma unroll
  for (int m = 0; m < BM; ++m) red[m * THREADS + threadIdx.x] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
  cluster_sync();                                     // every block's partials written and visible to the cluster
  const int rows_per_rank = BM / SPLIT, rank = (int)cluster_rank();
  for (int i = threadIdx.x; i < rows_per_rank * THREADS; i += THREADS) {
    const int m = rank * rows_per_rank + i / THREADS, t = i % THREADS;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    #pragma unroll
    for (int q = 0; q < SPLIT; ++q) {                 // slice order: the split-K kernel's sum, bit for bit
      const float4 v = load_from_rank(red + m * THREADS + t, q);
      s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
    }
    const int gm = row0 + m, col = (blockIdx.x * THREADS + t) * VB;
    if (gm < M && col < N) *reinterpret_cast<float4*>(C + (long long)gm * N + col) = s;
  }
  cluster_sync();                                     // no block leaves while another still reads its partials
#else
  // ---- this slice's partial sums to the workspace P[SPLIT][M][N] ----
  if (gn < N) {
    #pragma unroll
    for (int m = 0; m < BM; ++m) {
      if (row0 + m >= M) break;
      *reinterpret_cast<float4*>(P + ((long long)blockIdx.y * M + row0 + m) * N + gn) =
          make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
    }
  }
#endif
}

extern "C" __global__ void splitk_sum(const float4* __restrict__ P, float4* __restrict__ C, int MN4, int split)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= MN4) return;
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int z = 0; z < split; ++z) {
    const float4 v = __ldcs(P + (long long)z * MN4 + i);
    s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
  }
  C[i] = s;
}
"""

KEYS = ("threads", "unroll", "minb", "pipe_a", "cluster", "split")


def V(**kw) -> dict:
    """A variant: threads per block, UNROLL (loads of B in flight per thread), MINB (``__launch_bounds__`` blocks per
    SM), PIPE_A, CLUSTER (module docstring), SPLIT (K slices; with CLUSTER the cluster's size, at most 8; 0 without
    CLUSTER: slices for about four blocks per SM, as the library sizes them)."""
    d = dict(threads=128, unroll=8, minb=4, pipe_a=0, cluster=0, split=0)
    d.update(kw)
    return d


# pairs: PIPE_A against its own occupancy (minb 3), CLUSTER against the workspace at the same SPLIT and threads
VARIANTS = [V(), V(minb=3), V(pipe_a=1, minb=3), V(split=8), V(cluster=1, split=8), V(cluster=1, split=8, pipe_a=1, minb=3),
            V(threads=64, minb=6, split=8), V(threads=64, cluster=1, split=8, minb=6), V(split=4), V(cluster=1, split=4)]


def ceil_div(x: int, y: int) -> int:
    return -(-x // y)


def options(bm: int, v: dict) -> tuple[str, ...]:
    return ("-std=c++17", f"-DBM={bm}", f"-DTHREADS={v['threads']}", f"-DUNROLL={v['unroll']}", f"-DMINB={v['minb']}",
            f"-DPIPE_A={v['pipe_a']}", f"-DCLUSTER={v['cluster']}", f"-DSPLIT={v['split']}")


def smem_bytes(bm: int, v: dict, depth: int) -> int:
    """A's staged slice (depth × BM floats), or with CLUSTER the partial sums if larger (BM × THREADS × 4 floats)."""
    return 4 * max(depth * bm, bm * v["threads"] * 4 if v["cluster"] else 0)


def compile_only() -> int:
    return compile_variants("nn_rows", SRC, VARIANTS, KEYS, options)


def main() -> int:
    return prototype_main(__doc__, "benchmarks/results/gemv_nn_cluster_proto_h200.json", compile_only, run)


def run(out: str) -> int:
    """The sweep (:func:`proto_sweep.sweep`) of :data:`VARIANTS` over a few x @ W products, written to ``out``."""
    import cupy as cp
    import numpy as np

    mods: dict = {}

    def proto(a, b, c, bm, v):
        m, k = a.shape
        n = b.shape[1]
        col_blocks = ceil_div(n, v["threads"] * 4)
        sms = sm_count()
        split = v["split"] or max(1, min(64, ceil_div(4 * sms, col_blocks), k // 32))
        depth = 4 * ceil_div(ceil_div(k, split), 4)  # slices a multiple of 4 deep (A staged 16 bytes at a time)
        split = ceil_div(k, depth)
        if n % 4 or k % 4 or (v["cluster"] and (split != v["split"] or bm % split)):
            raise ValueError(f"{m}x{n}x{k}: the prototype wants N and K multiples of 4 and (with CLUSTER) SPLIT = "
                             f"{v['split']} slices of K dividing BM = {bm}")
        key = options(bm, v)
        if key not in mods:
            mods[key] = cp.RawModule(code=SRC, options=key)
        kern, red = mods[key].get_function("nn_rows"), mods[key].get_function("splitk_sum")
        smem = smem_bytes(bm, v, depth)
        kern.max_dynamic_shared_size_bytes = smem
        # the workspace only without CLUSTER, NaN so that an unwritten partial sum fails the check
        ws = None if v["cluster"] else cp.full((split, m, n), cp.nan, dtype=cp.float32)
        grid = (col_blocks, split, -(-m // bm))
        args = (a, b, c, c if ws is None else ws, np.int32(m), np.int32(n), np.int32(k), np.int32(depth))  # P unused

        def run():
            kern(grid, (v["threads"],), args, shared_mem=smem)
            if not v["cluster"]:
                red((-(-(m * n // 4) // 256),), (256,), (ws, c, np.int32(m * n // 4), np.int32(split)))
        per_sm = blocks_per_sm(v["threads"], kern.num_regs, smem)
        blocks = grid[0] * grid[1] * grid[2]
        return run, dict(split=split, depth=depth, smem=smem, regs=kern.num_regs, lmem=kern.local_size_bytes,
                         blocks=blocks, blocks_per_sm=per_sm, waves=blocks / (per_sm * sms))

    shapes = [(16, 4096, 4096), (16, 11008, 4096), (16, 14336, 4096), (16, 22016, 4096), (16, 28672, 4096),
              (16, 32000, 4096), (16, 128256, 4096), (16, 4096, 11008), (16, 4096, 14336), (12, 14336, 4096),
              (8, 22016, 4096), (8, 4096, 4096)]
    return sweep("benchmarks/gemv_nn_cluster_proto.py", out, shapes,
                 lambda rng, n, k: rng.standard_normal((k, n), dtype=cp.float32), VARIANTS, KEYS, proto)


if __name__ == "__main__":
    raise SystemExit(main())
