"""Prototype variants (outside the library) of the FP64 tensor-core GEMV kernel for x @ W.T (W [N, K] row-major), timed
GPU alone beside the library's pick, to decide what the emitter does next (session 35, 2026-12-05).

Nsight Compute on the pick (16×22016×4096, H200, session 34): L2 88.6 % busy at 79.6 % of DRAM's peak, most warp cycles
waiting on L1TEX, issue slots 15.8 %: every warp reads its own copy of A (16 rows × its K slice: as many bytes as its
W) through L1, and W's evict-first loads allocate in L1 beside it. The variants:

- ``base``: the library's source for the pick (``schedule=None`` where it runs the FP64 kernel, else ``GEMV_DMMA``'s form);
- ``base_sum``: ``base`` and the library's split-K kernel after it (at most 8 K slices), into C; ``cluster``: the same
  slices summed in the kernel through distributed shared memory, the K slices of a group of columns one thread-block
  cluster (``__cluster_dims__(1, SPLIT_K, 1)``, sm_90; no workspace, no second launch), bit for bit ``base_sum``'s;
- ``cg`` / ``na``: W read with ``ld.global.cg`` (L2 only) / ``ld.global.nc.L1::no_allocate`` in place of ``__ldcs``;
- ``na_el``: ``na`` and A read with ``ld.global.nc.L1::evict_last``;
- ``bn256``: 8 warps per block (the block's warps share A in L1), 2 blocks per SM;
- ``base512`` / ``slice_a4`` / ``slice_a8`` / ``slice_a8m5``: the library's kernel at K slices of 512, and A's whole
  512-deep slice staged once per block in shared memory as float32 (one barrier), read at use time, at unroll 4 and 8
  (4 blocks per SM) and 8 at 5 blocks — each with the split-K kernel after it, so comparable with ``base512`` only;
  ``slice_p2`` / ``slice_p3`` / ``slice_p4`` / ``slice_p2m5``: the same, software-pipelined (group i + 1 of W requested
  before group i is multiplied, two register buffers), unroll 2 to 4 (measured on an H100 in session 36: every one
  slower than ``base512``);
- ``bulk…`` (:data:`BULK_FORMS`, session 37): W through a per-warp ring of STAGES chunks (CH elements of K of the warp's
  16 or 32 rows of W) in shared memory, each row's chunk one ``cp.async.bulk`` completing on the stage's mbarrier, A read
  as the library reads it; options an L2 evict-first hint (``ef``), A's next chunk prefetched into L1 (``pf``), K slices
  re-cut for the variant's blocks per SM (``w``); the library's K slices otherwise (its bits);
- ``sa`` (and ``sa3``: 3 blocks per SM, ``sa_na``, ``sa256``): A staged once per block in shared memory, already in float64 and in fragment order
  (one 16-byte load per element pair), two chunks of UNROLL k16 steps, one ``__syncthreads`` per chunk; W as ``base``
  (``na``: no L1 allocation); ``sa256``: 8 warps.

Every variant's C is checked against a float64 product and compared bit for bit: the variants that sum their slices
(``cluster``, ``slice_a*``) with the library's kernel and split-K sum at the same number of slices (``base_sum``,
``base512``, whichever ran before at that count; none: ``bits_equal`` null), the others with ``base``'s. The same steps
in the same order give the same sums, except where a variant cuts K differently (the ``sa`` variants: slices of
16·UNROLL, the library's of 16), which ``bits_equal`` then records as false. Timed with ``time_gpu(gpu_only=True)`` (L2
flushed clean before each, the stream held), median of 30: the GEMV kernel alone for ``base`` and the variants of its
kernel, the kernel and the split-K sum for ``base_sum``, ``cluster``, ``base512`` and ``slice_a*`` (comparable with
each other at the same slices only); share of a 2 GiB copy timed the same way. Products: the LLM set's (N, K) of at
least 64 MiB with K a multiple of 64.

Measured on an H100 (2026-12-05, ``benchmarks/results/gemv_dmma_h100_2026-12-05/``, docs/gemm.md): none of the variants
is faster than ``base`` by more than 0.2 % on the geomean, nor ``cluster`` than ``base_sum``. Session 36
(``benchmarks/results/pdl_h100_2026-12-05/``): the ``slice_*`` variants all slower than ``base512``; the ``pdl_*``
variants 1.2-1.4 % faster than ``base_sum`` (the library launches its split-K sum so since), ``pdl_vec4`` not. Session
37 (``benchmarks/results/h100_2026-12-05_s37/``, ``h200_2026-12-05_s37/``): ``bulk64s2ef`` level with ``base`` on an
H100 (faster on one-slice products, slower on short slices), slower on an H200 (0.805 against 0.842); the others slower.

Run (GPU): ``python benchmarks/gemv_dmma_proto.py --m 16 12 --out benchmarks/results/gemv_dmma_proto.json``; under
Nsight Compute ``ncu --profile-from-start off ... python benchmarks/gemv_dmma_proto.py --profile 16 22016 4096``
(each variant's kernel profiled once; the times it prints are then the profiler's).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import re
from dataclasses import replace

import cupy as cp
import numpy as np
from beside import copy_gbps, gpu_name, llm_weights

import tiledsl
from tiledsl.codegen.writer import Writer
from tiledsl.compile import KernelSource, compile_source
from tiledsl.dependent import DependentLaunch
from tiledsl.gemm import default_schedule
from tiledsl.gemm.emit import emit_splitk_reduce
from tiledsl.gemm.emit_gemv_mma import MMA_16816_F64_HELPER, _multiply_step_f64, emit_gemm_gemv_mma
from tiledsl.gemm.family import gemv_dmma_schedule
from tiledsl.runtime import launch
from tiledsl.timing import time_gpu

LOADS = r"""
__device__ __forceinline__ float4 ld_cg(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float4 ld_na(const float* p) {
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float4 ld_el(const float* p) {
  float4 v;
  asm volatile("ld.global.nc.L1::evict_last.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ float4 ld_cs(const float* p) { return __ldcs(reinterpret_cast<const float4*>(p)); }
"""

def _multiply_step() -> str:
    w = Writer()
    _multiply_step_f64(w, row_b=False)
    return w.text()


MULTIPLY_STEP = _multiply_step()
"""One k16 step of the prototype kernels: the library's own ``multiply_step`` for x @ W.T (its emitter's text)."""

HEAD = """extern "C" __global__ void __launch_bounds__(THREADS, MINB)
{name}(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K,
    long long lda, long long ldb, long long ldc, int k_per_split) {{
  extern __shared__ {smem};
  const int k_begin = min(K, (int)blockIdx.y * k_per_split), k_end = min(K, k_begin + k_per_split);
  C += (long long)blockIdx.y * M * ldc;  // this slice's partial sums
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row0 = blockIdx.z * 16;
  const int n0 = (blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * RN;
"""
"""The prototype kernels' common head: K slice, lane coordinates, the warp's first column."""

STAGED = r"""
// A staged once per block: sa[buffer][step u][element pair p][lane] = (A[g][k + 16u + 4t + p], A[g + 8][...]) in
// float64, for lane (g, t): each lane reads its 8 A registers of a step as 4 conflict-free 16-byte loads
constexpr int FRAGS = RN / 8;
constexpr int ITEMS = UNROLL * 64;                        // float4 of A per chunk: UNROLL steps x 2 rows-halves x 32 lanes
constexpr int PER = (ITEMS + THREADS - 1) / THREADS;      // per thread
""" + HEAD.format(name="gemv_dmma_staged", smem="double2 sa[]") + r"""  const float* b_col[FRAGS];
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j) b_col[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + 4 * t;
  double acc[FRAGS][4] = {};
  float4 av[PER];
  const int chunks = (k_end - k_begin) / (16 * UNROLL);  // the host makes every slice a multiple of 16 * UNROLL
  auto load_a = [&](int k) {
    #pragma unroll
    for (int q = 0; q < PER; ++q) {
      const int i = threadIdx.x + q * THREADS;
      if (i < ITEMS) {
        const int s = i / 64, h = (i / 32) % 2, l = i % 32;
        const int row = min(row0 + l / 4 + 8 * h, M - 1);
        av[q] = *reinterpret_cast<const float4*>(A + (long long)row * lda + k + 16 * s + 4 * (l % 4));
      }
    }
  };
  auto store_a = [&](int buf) {
    double* const d = reinterpret_cast<double*>(sa);
    #pragma unroll
    for (int q = 0; q < PER; ++q) {
      const int i = threadIdx.x + q * THREADS;
      if (i < ITEMS) {
        const int s = i / 64, h = (i / 32) % 2, l = i % 32;
        const int base = ((buf * UNROLL + s) * 4 * 32 + l) * 2 + h;
        d[base] = av[q].x; d[base + 64] = av[q].y; d[base + 128] = av[q].z; d[base + 192] = av[q].w;
      }
    }
  };
  if (chunks > 0) { load_a(k_begin); store_a(0); }
  __syncthreads();
  #pragma unroll 1
  for (int c = 0; c < chunks; ++c) {
    const int k = k_begin + c * 16 * UNROLL;
    float4 b[UNROLL][FRAGS];
    if (n0 < N) {
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        #pragma unroll
        for (int j = 0; j < FRAGS; ++j) b[u][j] = LDB(b_col[j] + k + 16 * u);
    }
    if (c + 1 < chunks) load_a(k + 16 * UNROLL);
    if (n0 < N) {
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const double2* const s2 = sa + ((c & 1) * UNROLL + u) * 4 * 32 + lane;
        const double2 p0 = s2[0], p1 = s2[32], p2 = s2[64], p3 = s2[96];
        const double a[8] = {p0.x, p0.y, p1.x, p1.y, p2.x, p2.y, p3.x, p3.y};
        #pragma unroll
        for (int j = 0; j < FRAGS; ++j) {
          const double bj[4] = {b[u][j].x, b[u][j].y, b[u][j].z, b[u][j].w};
          tdsl_mma_16816_f64(acc[j], a, bj);
        }
      }
    }
    if (c + 1 < chunks) store_a((c + 1) & 1);
    __syncthreads();
  }
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j)
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = row0 + g + 8 * (i / 2), n = n0 + 8 * j + 2 * t + i % 2;
      if (m < M && n < N) C[(long long)m * ldc + n] = static_cast<float>(acc[j][i]);
    }
}
"""


RING = r"""
// W and A through a per-warp ring of STAGES k16 steps in shared memory, filled by cp.async: each lane copies the very
// vectors it later reads (A's rows g and g + 8, B's FRAGS columns at k + 4t), so no other lane's copy is waited for
// and no barrier is needed; slot layout [vector][lane] (16-byte loads and stores, conflict-free)
constexpr int FRAGS = RN / 8;
constexpr int VECS = 2 + FRAGS;  // per lane and step: A rows g, g + 8; B vectors 0 .. FRAGS-1
__device__ __forceinline__ void cp16(float4* smem, const float* gmem, bool in, bool l1) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  const int n = in ? 16 : 0;
  if (l1) asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(gmem), "r"(n));
  else asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(s), "l"(gmem), "r"(n));
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait_groups() {
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");  // the ring's reads stay after the wait
}
""" + MULTIPLY_STEP + r"""""" + HEAD.format(name="gemv_dmma_ring", smem="float4 ring[]") + r"""  const float* const a_lo = A + (long long)min(row0 + g, M - 1) * lda + 4 * t;
  const float* const a_hi = A + (long long)min(row0 + g + 8, M - 1) * lda + 4 * t;
  const float* b_col[FRAGS];
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j) b_col[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + 4 * t;
  float4* const mine = ring + (threadIdx.x / 32) * (STAGES * VECS * 32) + lane;
  double acc[FRAGS][4] = {};
  const int steps = (k_end - k_begin + 15) / 16;
  auto request = [&](int i) {  // step i of the slice into slot i % STAGES; vectors past k_end: zeros, nothing read
    const int k = k_begin + 16 * i;
    const bool in = k + 4 * t < k_end;
    const int kk = in ? k : k_begin;
    float4* const slot = mine + (i % STAGES) * (VECS * 32);
    cp16(slot, a_lo + kk, in, A_L1);
    cp16(slot + 32, a_hi + kk, in, A_L1);
    #pragma unroll
    for (int j = 0; j < FRAGS; ++j) cp16(slot + (2 + j) * 32, b_col[j] + kk, in, false);
  };
  if (n0 < N) {
    #pragma unroll
    for (int i = 0; i < STAGES - 1; ++i) {
      if (i < steps) request(i);
      commit();
    }
    #pragma unroll 1
    for (int i = 0; i < steps; ++i) {
      if (i + STAGES - 1 < steps) request(i + STAGES - 1);  // into the slot step i - 1 was read from
      commit();
      wait_groups<STAGES - 1>();  // this lane's copies of step i have landed
      const float4* const slot = mine + (i % STAGES) * (VECS * 32);
      float4 b[FRAGS];
      #pragma unroll
      for (int j = 0; j < FRAGS; ++j) b[j] = slot[(2 + j) * 32];
      multiply_step(acc, slot[0], slot[32], b);
    }
  }
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j)
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = row0 + g + 8 * (i / 2), n = n0 + 8 * j + 2 * t + i % 2;
      if (m < M && n < N) C[(long long)m * ldc + n] = static_cast<float>(acc[j][i]);
    }
}
"""

RING_FORMS = {  # variant: (STAGES, blocks per SM, A through L1)
    "r4m4": (4, 4, 1), "r6m4": (6, 4, 1), "r8m4": (8, 4, 1), "r4m6": (4, 6, 1), "r3m8": (3, 8, 1),
    "r6m4cg": (6, 4, 0), "r5m5": (5, 5, 1),
}


def ring_kernel(op, s, variant):
    stages, minb, a_l1 = RING_FORMS[variant]
    src = (MMA_16816_F64_HELPER + f"constexpr int THREADS = {s.bn}, RN = {s.rn}, STAGES = {stages}, MINB = {minb};\n"
           f"constexpr bool A_L1 = {'true' if a_l1 else 'false'};\n" + RING)
    smem = s.bn // 32 * stages * (2 + s.rn // 8) * 32 * 16
    ks = KernelSource(name="gemv_dmma_ring", source=src, block=(s.bn, 1, 1), dynamic_smem_bytes=smem)
    kern = compile_source(ks, "sm_90")
    grid = (math.ceil(op.n / (s.bn // 32 * s.rn)), s.split_k, math.ceil(op.m / 16))
    return kern, grid


CLUSTER_HELPERS = r"""
// ---- thread-block cluster (sm_90): the K slices of a group of columns are one cluster along y ----
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ float load_from_rank(const float* p, unsigned rank) {  // the same address in block `rank`
  unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
"""

CLUSTER_EPILOGUE = r"""  // ---- the slices sum through distributed shared memory: each block's partials (rounded to float32, as the
  // workspace's) to its own shared memory, then block r of the cluster adds its share of them over every block, in
  // slice order (the split-K kernel's sum, bit for bit) ----
  constexpr int COLS = THREADS / 32 * RN;  // the block's columns
  __shared__ float part[BM * COLS];
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j)
    #pragma unroll
    for (int i = 0; i < 4; ++i)
      part[(g + 8 * (i / 2)) * COLS + threadIdx.x / 32 * RN + 8 * j + 2 * t + i % 2] = static_cast<float>(acc[j][i]);
  cluster_sync();
  const unsigned rank = cluster_rank();
  for (int e = rank * THREADS + threadIdx.x; e < BM * COLS; e += SPLIT_K * THREADS) {
    float sum = 0.f;
    #pragma unroll
    for (int z = 0; z < SPLIT_K; ++z) sum += load_from_rank(part + e, z);
    const int m = row0 + e / COLS, n = blockIdx.x * COLS + e % COLS;
    if (m < M && n < N) C[(long long)m * ldc + n] = alpha * sum;
  }
  cluster_sync();  // no block leaves while another still reads its partials
}
"""


def cluster_kernel(op, s):
    """The library's source for ``s`` (split_k 2..8) with its slices summed in a thread-block cluster."""
    src = emit_gemm_gemv_mma(op, s).source
    body = src.index('extern "C"')
    src = src[:body] + CLUSTER_HELPERS + src[body:]
    src = src.replace('extern "C" __global__ void __launch_bounds__', 'extern "C" __global__ void __cluster_dims__(1, SPLIT_K, 1) __launch_bounds__')
    assert "C += (long long)blockIdx.y * M * ldc;" in src
    src = src.replace("  C += (long long)blockIdx.y * M * ldc;\n", "")
    src = src[:src.index("  // ---- epilogue")] + CLUSTER_EPILOGUE
    name = "gemv_dmma_cluster"
    src = re.sub(r"tiledsl_gemv_gemm_\w+\(", name + "(", src, count=1)
    kern = compile_source(KernelSource(name=name, source=src, block=(s.bn, 1, 1)), "sm_90")
    grid = (math.ceil(op.n / (s.bn // 32 * s.rn)), s.split_k, math.ceil(op.m / 16))
    return kern, grid


def base_kernel(op, s, variant):
    """The library's source for ``s``, its loads changed as ``variant`` says; (Kernel, grid, k_per_split)."""
    ks = emit_gemm_gemv_mma(op, s)
    src = ks.source
    if variant in ("cg", "na", "na_el"):
        body = src.index('extern "C"')
        src = src[:body] + LOADS + src[body:]
        src = src.replace("__ldcs(reinterpret_cast<const float4*>(b_col[j] + kk))", f"ld_{variant[:2]}(b_col[j] + kk)")
        src = src.replace("__ldcs(reinterpret_cast<const float4*>(b_col[j] + k))", f"ld_{variant[:2]}(b_col[j] + k)")
        if variant == "na_el":
            src = re.sub(r"\*reinterpret_cast<const float4\*>\((a_(?:lo|hi) \+ kk?)\)", r"ld_el(\1)", src)
        assert "__ldcs(reinterpret_cast<const float4*>(b_col" not in src, "a W load was not replaced"
    kern = compile_source(replace(ks, source=src), "sm_90")
    grid = (math.ceil(op.n / (s.bn // 32 * s.rn)), s.split_k, math.ceil(op.m / 16))
    return kern, grid


def staged_kernel(op, s, variant):
    threads = 256 if variant == "sa256" else s.bn
    minb = max(1, s.min_blocks * s.bn // threads - (variant == "sa3"))
    ldb = "ld_na" if variant == "sa_na" else "ld_cs"
    src = (MMA_16816_F64_HELPER + LOADS + f"#define LDB {ldb}\nconstexpr int THREADS = {threads}, RN = {s.rn}, "
           f"UNROLL = {s.unroll}, MINB = {minb};\n" + STAGED)
    ks = KernelSource(name="gemv_dmma_staged", source=src, block=(threads, 1, 1),
                      dynamic_smem_bytes=2 * s.unroll * 4 * 32 * 16)
    kern = compile_source(ks, "sm_90")
    grid = (math.ceil(op.n / (threads // 32 * s.rn)), s.split_k, math.ceil(op.m / 16))
    return kern, grid


SLICE_A_LOOP = r"""    int k = 0;  // from k_begin
    #pragma unroll 1
    for (; k + 16 * UNROLL <= depth; k += 16 * UNROLL) {
      float4 b[UNROLL][FRAGS];
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        #pragma unroll
        for (int j = 0; j < FRAGS; ++j) b[u][j] = __ldcs(reinterpret_cast<const float4*>(b_col[j] + k + 16 * u));
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        multiply_step(acc, *reinterpret_cast<const float4*>(s_lo + k + 16 * u),
                      *reinterpret_cast<const float4*>(s_hi + k + 16 * u), b[u]);
    }
"""
"""The slice_a variants' main loop: UNROLL k16 steps of W loaded, then multiplied with A read from shared memory."""

SLICE_A = r"""
// A's whole K slice staged once per block in shared memory as float32 (one barrier, at the start), read at use time:
// no registers hold A in flight, so UNROLL steps of B in flight cost half the registers of the library's form
constexpr int FRAGS = RN / 8;
// A's rows in shared memory k_per_split + PAD floats apart: where the slice depth is a multiple of 32 (every product of
// the sweep: 512 or 384) the 8 lanes of a quarter warp's 16-byte reads, rows g and g + 1 at k + 4t, fall in distinct
// banks
""" + MULTIPLY_STEP + r"""""" + HEAD.format(name="gemv_dmma_slice_a", smem="float as[]") + r"""
  const int depth = k_end - k_begin, ld_s = k_per_split + PAD;
  for (int i = threadIdx.x; i < 16 * (depth / 4); i += THREADS) {  // rows past M: row M - 1 (never stored)
    const int r = i / (depth / 4), c4 = i % (depth / 4);
    *reinterpret_cast<float4*>(as + r * ld_s + 4 * c4) =
        *reinterpret_cast<const float4*>(A + (long long)min(row0 + r, M - 1) * lda + k_begin + 4 * c4);
  }
  __syncthreads();
  const float* const s_lo = as + g * ld_s + 4 * t;
  const float* const s_hi = as + (g + 8) * ld_s + 4 * t;
  const float* b_col[FRAGS];
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j) b_col[j] = B + (long long)min(n0 + 8 * j + g, N - 1) * ldb + k_begin + 4 * t;
  double acc[FRAGS][4] = {};
  if (n0 < N) {
""" + SLICE_A_LOOP + r"""    #pragma unroll 1
    for (; k < depth; k += 16) {
      const bool in = k + 4 * t < depth;
      const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
      float4 b[FRAGS];
      #pragma unroll
      for (int j = 0; j < FRAGS; ++j) b[j] = in ? __ldcs(reinterpret_cast<const float4*>(b_col[j] + k)) : zero;
      multiply_step(acc, in ? *reinterpret_cast<const float4*>(s_lo + k) : zero,
                    in ? *reinterpret_cast<const float4*>(s_hi + k) : zero, b);
    }
  }
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j)
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = row0 + g + 8 * (i / 2), n = n0 + 8 * j + 2 * t + i % 2;
      if (m < M && n < N) C[(long long)m * ldc + n] = static_cast<float>(acc[j][i]);
    }
}
"""

SLICE_P = SLICE_A.replace("gemv_dmma_slice_a", "gemv_dmma_slice_p").replace(SLICE_A_LOOP, r"""    // software-pipelined: group i + 1's vectors of W are requested before group i is multiplied (two register
    // buffers, the loop unrolled by two so that neither is copied), the same steps in the same order
    auto load = [&](float4 (&b)[UNROLL][FRAGS], int k) {
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        #pragma unroll
        for (int j = 0; j < FRAGS; ++j) b[u][j] = __ldcs(reinterpret_cast<const float4*>(b_col[j] + k + 16 * u));
    };
    auto mult = [&](const float4 (&b)[UNROLL][FRAGS], int k) {
      #pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        multiply_step(acc, *reinterpret_cast<const float4*>(s_lo + k + 16 * u),
                      *reinterpret_cast<const float4*>(s_hi + k + 16 * u), b[u]);
    };
    const int groups = depth / (16 * UNROLL);
    float4 b0[UNROLL][FRAGS], b1[UNROLL][FRAGS];
    if (groups > 0) load(b0, 0);
    int q = 0;
    #pragma unroll 1
    for (; q + 2 <= groups; q += 2) {
      load(b1, (q + 1) * 16 * UNROLL);
      mult(b0, q * 16 * UNROLL);
      if (q + 2 < groups) load(b0, (q + 2) * 16 * UNROLL);
      mult(b1, (q + 1) * 16 * UNROLL);
    }
    if (q < groups) mult(b0, q * 16 * UNROLL);
    int k = groups * 16 * UNROLL;
""")
assert SLICE_P != SLICE_A.replace("gemv_dmma_slice_a", "gemv_dmma_slice_p"), "the pipelined loop was not substituted"

SLICE_A_DEPTH = 512
"""The K slice of the ``slice_a`` variants (A's 16 rows of it: 33 KiB of shared memory per block)."""

SLICE_A_FORMS = {"base512": None, "slice_a4": (4, 4), "slice_a8": (8, 4), "slice_a8m5": (8, 5),
                 "slice_p2": (2, 4), "slice_p3": (3, 4), "slice_p4": (4, 4), "slice_p2m5": (2, 5)}
"""variant: (UNROLL, blocks per SM) of A's whole slice staged; ``base512``: the library's kernel at the same slices.
Without spills (ptxas, NVRTC 12.9, sm_90): unroll 4 and 8 at 4 blocks per SM, 8 at 5 (96 registers); unroll 4 at 5 or 6
blocks spills 84-104 bytes, 8 at 6 56. In the SASS the library's form issues 8 vectors of A and 8 of W per lane before
its first DMMA; ``slice_a8`` 10 of W (its other 6 after step 0's arrive), ``slice_a8m5`` 9, at 16 and 20 warps per SM."""


SPILLING_FORMS = ("slice_p3", "slice_p4", "slice_p2m5")
"""Forms whose registers spill (ptxas, NVRTC 12.9, sm_90: 68, 56 and 72 bytes at 128, 128 and 96 registers), timed all the same:
the software-pipelined loop (``slice_p*``) holds two groups of W; ``slice_p2`` fits 128 registers without."""

SLICE_A_PAD = 16
"""Floats past each row of A's staged slice (the kernel's ``PAD``)."""


BULK_HELPERS = r"""
// ---- 1D bulk copies global -> shared completing on an mbarrier (PTX ISA: cp.async.bulk, mbarrier; sm_90). On the
// host (tests' runner: no __CUDACC_RTC__) a copy lands when issued and a wait is the warp's barrier ----
#ifdef __CUDACC_RTC__
__device__ __forceinline__ void bar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" :: "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void bar_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
               :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_copy(float* dst, const float* src, unsigned bytes, unsigned long long* bar) {
#if EVICT_FIRST
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n"
               :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes),
                  "r"((unsigned)__cvta_generic_to_shared(bar)), "l"(policy) : "memory");
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
               :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes),
                  "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
#endif
}
__device__ __forceinline__ void prefetch_l1(const float* p) { asm volatile("prefetch.global.L1 [%0];\n" :: "l"(p)); }
__device__ __forceinline__ void bar_wait(unsigned long long* bar, unsigned parity) {
  const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                 : "=r"(done) : "r"(b), "r"(parity) : "memory");
  }
}
#else
inline void bar_init(unsigned long long* bar) { *bar = 0; }
inline void bar_expect(unsigned long long* bar, unsigned bytes) { *bar += bytes; }
inline void bulk_copy(float* dst, const float* src, unsigned bytes, unsigned long long* bar) {
  for (unsigned i = 0; i < bytes / 4; ++i) dst[i] = src[i];
}
inline void bar_wait(unsigned long long*, unsigned) { __syncwarp(); }  // every lane's copies have landed
inline void prefetch_l1(const float*) {}
#endif
"""

BULK = r"""
// W through a per-warp ring of STAGES chunks in shared memory, each chunk CH elements of K of the warp's RN rows of W,
// one 1D bulk copy per row (lane r copies row r), completing on the stage's mbarrier: bytes in flight without
// registers, no barrier between warps. A as the library reads it (16-byte loads through L1), a chunk's worth loaded
// before the wait. The same k16 steps in the same order as the library's kernel.
constexpr int FRAGS = RN / 8;
constexpr int LDS_ROW = CH + 16;             // floats per staged row: rows g and g + 1 64 bytes apart in the banks
constexpr int STAGE = RN * LDS_ROW;          // floats per stage
constexpr int STEPS = CH / 16;
""" + MULTIPLY_STEP + HEAD.format(name="gemv_dmma_bulk", smem="__align__(128) float smem[]") + r"""  const int warp = threadIdx.x / 32;
  float* const ring = smem + warp * STAGES * STAGE;
  unsigned long long* const bars = reinterpret_cast<unsigned long long*>(smem + THREADS / 32 * STAGES * STAGE) + warp * STAGES;
  if (lane == 0)
    for (int s = 0; s < STAGES; ++s) bar_init(bars + s);
  __syncwarp();
  const float* const a_lo = A + (long long)min(row0 + g, M - 1) * lda + k_begin + 4 * t;
  const float* const a_hi = A + (long long)min(row0 + g + 8, M - 1) * lda + k_begin + 4 * t;
  const float* const w_row = B + (long long)min(n0 + lane % RN, N - 1) * ldb + k_begin;  // lanes < RN copy
  const int depth = k_end - k_begin;         // a multiple of 16 (the host's slices and K)
  const int chunks = (depth + CH - 1) / CH;
  double acc[FRAGS][4] = {};
  if (n0 < N) {
    auto issue = [&](int c) {                // chunk c into stage c % STAGES
      const int s = c % STAGES, len = min(CH, depth - c * CH);
      if (lane == 0) bar_expect(bars + s, RN * len * 4);
      __syncwarp();
      if (lane < RN) bulk_copy(ring + s * STAGE + lane * LDS_ROW, w_row + c * CH, len * 4, bars + s);
    };
    for (int c = 0; c < min(STAGES, chunks); ++c) issue(c);
    #pragma unroll 1
    for (int c = 0; c < chunks; ++c) {
      const int s = c % STAGES, len = min(CH, depth - c * CH);
#if PREFETCH_A
      // A's 16 rows of chunk c + 1 into L1 (128-byte lines, 16 * CH / 32 of them), so that its loads hit there
      for (int q = lane; q < 16 * CH / 32; q += 32) {
        const int kq = (c + 1) * CH + 32 * (q / 16);
        if (kq < depth) prefetch_l1(A + (long long)min(row0 + q % 16, M - 1) * lda + k_begin + kq);
      }
#endif
      float4 lo[STEPS], hi[STEPS];
      #pragma unroll
      for (int u = 0; u < STEPS; ++u)
        if (16 * u < len) {
          lo[u] = *reinterpret_cast<const float4*>(a_lo + c * CH + 16 * u);
          hi[u] = *reinterpret_cast<const float4*>(a_hi + c * CH + 16 * u);
        }
      bar_wait(bars + s, (c / STAGES) & 1);
      const float* const st = ring + s * STAGE + g * LDS_ROW + 4 * t;
      #pragma unroll
      for (int u = 0; u < STEPS; ++u)
        if (16 * u < len) {
          float4 b[FRAGS];
          #pragma unroll
          for (int j = 0; j < FRAGS; ++j) b[j] = *reinterpret_cast<const float4*>(st + 8 * j * LDS_ROW + 16 * u);
          multiply_step(acc, lo[u], hi[u], b);
        }
      __syncwarp();                            // every lane's reads of stage s are done before its refill
      if (c + STAGES < chunks) issue(c + STAGES);
    }
  }
  #pragma unroll
  for (int j = 0; j < FRAGS; ++j)
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = row0 + g + 8 * (i / 2), n = n0 + 8 * j + 2 * t + i % 2;
      if (m < M && n < N) C[(long long)m * ldc + n] = static_cast<float>(acc[j][i]);
    }
}
"""

BULK_FORMS = {  # variant: (RN, CH, STAGES, warps per block, L2 evict-first, K slices for one wave, A prefetched)
    "bulk64s2": (16, 64, 2, 4, 0, 0, 0), "bulk64s3": (16, 64, 3, 4, 0, 0, 0), "bulk64s4": (16, 64, 4, 4, 0, 0, 0),
    "bulk128s2": (16, 128, 2, 4, 0, 0, 0), "bulk128s3": (16, 128, 3, 4, 0, 0, 0), "bulk64s3ef": (16, 64, 3, 4, 1, 0, 0),
    "bulk32c64s2": (32, 64, 2, 4, 0, 0, 0),
    "bulk64s2pf": (16, 64, 2, 4, 0, 0, 1), "bulk64s2ef": (16, 64, 2, 4, 1, 0, 0), "bulk64s2efpf": (16, 64, 2, 4, 1, 0, 1),
    "bulk64s3w": (16, 64, 3, 4, 0, 1, 0), "bulk64s3wpf": (16, 64, 3, 4, 0, 1, 1), "bulk64s4wpf": (16, 64, 4, 4, 0, 1, 1),
    "bulk128s2w": (16, 128, 2, 4, 0, 1, 0), "bulk128s2wpf": (16, 128, 2, 4, 0, 1, 1),
}
"""The bulk-copy variants (session 37): W's rows copied into a per-warp shared-memory ring by the copy engine. Without
"K slices for one wave" they take the library's slices (bit for bit its sums); with it, as many slices as fill the
variant's blocks per SM once over the GPU (its shared memory sets them), at least 64 deep."""

SMEM_PER_SM = 227 * 1024
"""Shared memory a block may take on sm_90 (the CUDA C++ Programming Guide's table), bytes; the bulk variants'
blocks per SM follow from it."""


def bulk_blocks_per_sm(variant) -> int:
    rn, ch, stages, warps = BULK_FORMS[variant][:4]
    smem = warps * stages * (rn * (ch + 16) * 4 + 8)
    return max(1, min(4, SMEM_PER_SM // (smem + 1024)))  # at most 16 warps per SM, as the library's pick


def bulk_source(variant):
    rn, ch, stages, warps, ef, _, pf = BULK_FORMS[variant]
    smem = warps * stages * (rn * (ch + 16) * 4 + 8)
    src = (MMA_16816_F64_HELPER + f"#define EVICT_FIRST {ef}\n#define PREFETCH_A {pf}\n" + BULK_HELPERS
           + f"constexpr int THREADS = {32 * warps}, RN = {rn}, CH = {ch}, STAGES = {stages}, "
           f"MINB = {bulk_blocks_per_sm(variant)};\n" + BULK)
    return src, smem, 32 * warps, rn


def bulk_kernel(op, s, variant):
    src, smem, threads, rn = bulk_source(variant)
    ks = KernelSource(name="gemv_dmma_bulk", source=src, block=(threads, 1, 1), dynamic_smem_bytes=smem)
    kern = compile_source(ks, "sm_90")
    columns = math.ceil(op.n / (threads // 32 * rn))
    if BULK_FORMS[variant][5]:  # slices that fill the blocks per SM once (the GPU's SMs)
        slots = tiledsl.Target.current().sm_count * bulk_blocks_per_sm(variant)
        split = max(1, min(slots // columns, op.k // 64))
        kps = math.ceil(op.k / (split * 16)) * 16
    else:
        kps = bulk_k_per_split(op, s)
    grid = (columns, math.ceil(op.k / kps), math.ceil(op.m / 16))
    return kern, grid, kps


def bulk_k_per_split(op, s) -> int:
    """The library's K slices (BK = 16) for ``s``: the same steps in the same order as ``base``."""
    return math.ceil(op.k / (s.split_k * 16)) * 16


def slice_a_split(op) -> int:
    return max(1, math.ceil(op.k / SLICE_A_DEPTH))


def slice_a_kernel(op, s, variant):
    unroll, minb = SLICE_A_FORMS[variant]
    assert s.bk == 16 and op.k % 4 == 0, (s.bk, op.k)  # the library's slices start on multiples of 16; A 4 wide
    kps = math.ceil(op.k / (slice_a_split(op) * 16)) * 16
    src = (MMA_16816_F64_HELPER + f"constexpr int THREADS = {s.bn}, RN = {s.rn}, UNROLL = {unroll}, MINB = {minb}, "
           f"PAD = {SLICE_A_PAD};\n" + (SLICE_P if variant.startswith("slice_p") else SLICE_A))
    ks = KernelSource(name="gemv_dmma_slice_p" if variant.startswith("slice_p") else "gemv_dmma_slice_a", source=src, block=(s.bn, 1, 1),
                      dynamic_smem_bytes=16 * (kps + SLICE_A_PAD) * 4)
    kern = compile_source(ks, "sm_90")
    grid = (math.ceil(op.n / (s.bn // 32 * s.rn)), slice_a_split(op), math.ceil(op.m / 16))
    return kern, grid, kps


PDL_TRIGGER = '  asm volatile("griddepcontrol.launch_dependents;");  // PDL: the split-K kernel may launch\n'
PDL_FORMS = ("pdl_none", "pdl_start", "pdl_loop", "pdl_vec4")
"""The split-K sum launched as a programmatic dependent launch (``cuLaunchKernelEx`` with programmatic stream
serialization, through the CUDA Python bindings; the sum kernel waits in ``griddepcontrol.wait`` before it reads the
workspace): the GEMV kernel triggers it nowhere (at its exit), at its start, or after its main loop; ``pdl_vec4``:
as ``pdl_none`` with a split-K kernel that sums 4 adjacent elements per thread (16-byte loads; M·N a multiple of 4)."""

SUM_VEC4 = r"""// the split-K sum, 4 adjacent elements of C per thread (16-byte loads of the workspace), as a dependent launch
extern "C" __global__ void __launch_bounds__(256)
splitk_sum_vec4(const float* __restrict__ W, float* __restrict__ C, int M, int N, long long ldc, float alpha) {
  const long long idx = 4 * (blockIdx.x * 256LL + threadIdx.x);  // first of 4 elements of C, row-major
  const long long mn = (long long)M * N;
  if (idx >= mn) return;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  #pragma unroll
  for (int z = 0; z < SPLIT_K; ++z) {  // the same order as the library's kernel: its bits
    const float4 v = *reinterpret_cast<const float4*>(W + z * mn + idx);
    sum.x += v.x; sum.y += v.y; sum.z += v.z; sum.w += v.w;
  }
  const float s[4] = {sum.x, sum.y, sum.z, sum.w};
  #pragma unroll
  for (int e = 0; e < 4; ++e) C[((idx + e) / N) * ldc + (idx + e) % N] = alpha * s[e];
}
"""


def pdl_kernels(op, s, variant):
    """The library's GEMV kernel (its trigger placed as ``variant`` says) and split-K kernel (it waits in
    ``griddepcontrol.wait`` since session 36; the measurement of 15edd4d inserted the same wait here)."""
    ks = emit_gemm_gemv_mma(op, s)
    src = ks.source
    if variant == "pdl_start":
        anchor = "  C += (long long)blockIdx.y * M * ldc;\n"
        assert anchor in src
        src = src.replace(anchor, anchor + PDL_TRIGGER)
    elif variant == "pdl_loop":
        anchor = "  // ---- epilogue"
        assert anchor in src
        src = src.replace(anchor, PDL_TRIGGER + anchor)
    kern = compile_source(replace(ks, source=src), "sm_90")
    if variant == "pdl_vec4":
        assert op.m * op.n % 4 == 0, (op.m, op.n)
        red = KernelSource(name="splitk_sum_vec4", source=f"constexpr int SPLIT_K = {s.split_k};\n" + SUM_VEC4,
                           block=(256, 1, 1))
        grid = (math.ceil(op.n / (s.bn // 32 * s.rn)), s.split_k, math.ceil(op.m / 16))
        return kern, grid, compile_source(red, "sm_90")
    red = emit_splitk_reduce(op, s)
    assert "griddepcontrol.wait" in red.source  # the library's split-K kernel waits for the GEMV grid (session 36)
    red_kern = compile_source(red, "sm_90")
    grid = (math.ceil(op.n / (s.bn // 32 * s.rn)), s.split_k, math.ceil(op.m / 16))
    return kern, grid, red_kern


_PDL: dict = {}  # (kernel, grid, argument types) -> its DependentLaunch


def pdl_launch(kern, grid, args) -> None:
    """``kern`` on CuPy's current stream as a programmatic dependent launch of the kernel before it, through the
    library's :class:`tiledsl.dependent.DependentLaunch` (arrays as pointers, NumPy scalars as their C types)."""
    types = tuple(ctypes.c_void_p if isinstance(a, cp.ndarray) else np.ctypeslib.as_ctypes_type(type(a)) for a in args)
    key = (kern.name, grid, types)
    if key not in _PDL:
        _PDL[key] = DependentLaunch(kern.function().ptr, kern.name, grid, kern.block, kern.dynamic_smem_bytes, types,
                                    {}, tuple((i, i, None if isinstance(a, cp.ndarray) else type(a))
                                              for i, a in enumerate(args)))
    _PDL[key](tuple(a.data.ptr if isinstance(a, cp.ndarray) else a for a in args), cp.cuda.get_current_stream().ptr)


VARIANTS = ("base", "base_sum", *PDL_FORMS, "cluster", "cg", "na", "na_el", "bn256", "sa", "sa3", "sa_na", "sa256", *RING_FORMS,
            *SLICE_A_FORMS, *BULK_FORMS)


def kernel_for(op, s, variant):
    if variant in PDL_FORMS and s.split_k > 1:  # the same kernels as base_sum: its bits
        s8 = replace(s, split_k=min(s.split_k, 8), split_k_fused=False)
        kern, grid, red = pdl_kernels(op, s8, variant)
        return kern, grid, ("pdl", (s8, red))
    if variant in PDL_FORMS:  # one slice: nothing to sum, base_sum's single launch
        variant = "base_sum"
    if variant == "base512":  # the library's kernel at the slice_a variants' K slices, and its split-K sum
        s512 = replace(s, split_k=slice_a_split(op), split_k_fused=False)
        kern, grid = base_kernel(op, s512, "base")
        return kern, grid, ("lib_sum", s512)
    if variant in SLICE_A_FORMS:  # the same slices as base512, the same steps in the same order: its bits
        kern, grid, kps = slice_a_kernel(op, s, variant)
        return kern, grid, ("staged_sum", (kps, replace(s, split_k=slice_a_split(op), split_k_fused=False)))
    if variant in BULK_FORMS:  # the library's K slices (BK = 16): the same steps in the same order as base
        kern, grid, kps = bulk_kernel(op, s, variant)
        return kern, grid, ("staged", kps)
    if variant in RING_FORMS:  # the library's K slices (BK = 16): the same steps in the same order as base
        kern, grid = ring_kernel(op, s, variant)
        kps = math.ceil(op.k / (s.split_k * 16)) * 16
        return kern, grid, ("staged", kps)
    if variant.startswith("sa"):
        kern, grid = staged_kernel(op, s, variant)
        step = 16 * s.unroll
        kps = math.ceil(op.k / (s.split_k * step)) * step
        return kern, grid, ("staged", kps)
    if variant == "cluster" and s.split_k > 1:  # (one slice: no sum to move; the cluster variant is base_sum)
        kern, grid = cluster_kernel(op, replace(s, split_k=min(s.split_k, 8)))
        return kern, grid, ("cluster", None)
    if variant in ("base_sum", "cluster"):
        kern, grid = base_kernel(op, replace(s, split_k=min(s.split_k, 8)), "base")
        return kern, grid, ("lib_sum", replace(s, split_k=min(s.split_k, 8)))  # kps: the schedule, for the sum
    if variant == "bn256":
        s = replace(s, bn=256, min_blocks=max(1, s.min_blocks // 2))
        variant = "base"
    kern, grid = base_kernel(op, s, variant)
    return kern, grid, ("lib", None)


def run_product(m, n, k, copy, variants, target, profile=False):
    op = tiledsl.GemmOp(m, n, k, layout_a="row", layout_b="col")
    s = default_schedule(op, target)
    if s.mma != "dmma":
        s = gemv_dmma_schedule(op, target)
    rng = cp.random.default_rng(m * 7919 + n + k)
    a = rng.standard_normal((m, k), dtype=cp.float32)
    w = rng.standard_normal((n, k), dtype=cp.float32)
    ref = (a.astype(cp.float64) @ w.T.astype(cp.float64))
    rows, base_c, sums = [], None, {}  # sums: C of the library's kernel and split-K sum, by number of slices
    for v in variants:
        kern, grid, (kind, kps) = kernel_for(op, s, v)
        split = grid[1]
        ws = cp.full((split, m, n), cp.nan, dtype=cp.float32)
        out = cp.full((m, n), cp.nan, dtype=cp.float32)
        lib_args = (a, w, ws, np.int32(m), np.int32(n), np.int32(k), np.int64(k), np.int64(k), np.int64(n),
                    np.float32(1.0))
        if kind in ("lib", "lib_sum", "pdl"):
            args = lib_args
        elif kind == "cluster":
            args = (a, w, out, *lib_args[3:])
        elif kind == "staged_sum":
            args = (*lib_args[:-1], np.int32(kps[0]))
        else:
            args = (*lib_args[:-1], np.int32(kps))
        launches = [(kern, grid, args)]
        if kind == "staged_sum":  # the library's split-K kernel after it
            red = compile_source(emit_splitk_reduce(op, kps[1]), "sm_90")
            launches.append((red, (math.ceil(m * n / red.block[0]), 1, 1),
                             (ws, out, np.int32(m), np.int32(n), np.int64(n), np.float32(1.0))))
        if kind == "lib_sum" and split > 1:  # the library's split-K kernel after it (its plan's grid)
            red = compile_source(emit_splitk_reduce(op, kps), "sm_90")  # kps holds the schedule here
            launches.append((red, (math.ceil(m * n / red.block[0]), 1, 1),
                             (ws, out, np.int32(m), np.int32(n), np.int64(n), np.float32(1.0))))
        elif kind == "lib_sum":
            launches = [(kern, grid, (a, w, out, *lib_args[3:]))]
        if kind == "pdl":  # the split-K kernel (waiting in griddepcontrol.wait) as a dependent launch
            red = kps[1]
            per = 4 if v == "pdl_vec4" else 1
            launches.append((red, (math.ceil(m * n / (per * red.block[0])), 1, 1),
                             (ws, out, np.int32(m), np.int32(n), np.int64(n), np.float32(1.0)), True))

        def call(launches=launches):
            for kn, gr, ar, *dependent in launches:
                (pdl_launch if dependent else launch)(kn, gr, ar)
        call()
        cp.cuda.Device().synchronize()
        if profile:  # one launch between cudaProfilerStart and Stop, for Nsight Compute
            cp.cuda.profiler.start()
            call()
            cp.cuda.Device().synchronize()
            cp.cuda.profiler.stop()
        c = out if kind in ("lib_sum", "cluster", "staged_sum", "pdl") else ws.sum(axis=0)
        err = float(cp.abs(c - ref).max() / cp.abs(ref).max())
        if not err < 1e-5:
            raise SystemExit(f"{m}x{n}x{k} {v}: error {err:.3e} against float64")
        if v == "base":
            base_c, same = c, True
        elif kind == "lib_sum" and v == "cluster":  # one slice: nothing to sum in a cluster
            same = None
        elif kind == "lib_sum":
            sums[split], same = c, True
        elif kind in ("cluster", "staged_sum", "pdl"):  # against the library's kernel and split-K sum at the same slices
            same = bool(cp.array_equal(c, sums[split])) if split in sums else None
        else:
            same = bool(cp.array_equal(c, base_c)) if base_c is not None else None
        t = time_gpu(call, gpu_only=True, warmup=3, repeat=30).median_ms
        gbps = n * k * 4 / t / 1e6
        rows.append(dict(m=m, n=n, k=k, variant=v, split=split, grid=grid, registers=kern.registers,
                         spill_bytes=kern.spill_bytes, gpu_ms=t, gbps=gbps, of_copy=gbps / copy, bits_equal=same,
                         err=err))
        print(f"{m:3d} {n:6d} {k:6d} {v:6s} split {split} regs {kern.registers:3d} spill {kern.spill_bytes:3d} "
              f"{t * 1e3:8.1f} us {gbps:7.0f} GB/s {gbps / copy:.3f} of copy  same={same} err={err:.1e}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, nargs="+", default=[16, 12])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--min-mib", type=float, default=64.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--profile", nargs=3, type=int, metavar=("M", "N", "K"),
                    help="one product, each variant launched once more inside cudaProfilerStart/Stop (for ncu "
                         "--profile-from-start off)")
    args = ap.parse_args()
    target = tiledsl.Target.current()
    if args.profile:
        run_product(*args.profile, 1.0, args.variants, target, profile=True)
        return
    copy = copy_gbps(gpu_only=True)
    print(f"{gpu_name()}: copy {copy:.0f} GB/s (GPU alone)")
    rows = []
    for m in args.m:
        for n, k in llm_weights():
            if n * k * 4 >= args.min_mib * 2**20 and k % 64 == 0:
                rows += run_product(m, n, k, copy, args.variants, target)
    for m in args.m:
        for v in args.variants:
            f = [r["of_copy"] for r in rows if r["m"] == m and r["variant"] == v]
            print(f"m={m:2d} {v:6s} geomean {math.exp(sum(map(math.log, f)) / len(f)):.3f} of copy "
                  f"(min {min(f):.3f}, max {max(f):.3f}, {sum(x >= 0.85 for x in f)} of {len(f)} at >= 0.85)")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(dict(gpu=gpu_name(), copy_gbps=copy, rows=rows), fh, indent=1)


if __name__ == "__main__":
    main()
