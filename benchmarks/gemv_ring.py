"""The ring of B loads of the staged-A GEMV kernel (``smem_a``, row-major B): where the refill sits, and a cp.async
ring in shared memory instead of registers (a prototype outside the library), timed beside ``schedule=None`` and
cuBLAS (session 21, 2026-12-03).

Two steps, so that kernels emitted at different commits can be timed in one GPU run:

* ``python benchmarks/gemv_ring.py dump LABEL`` (CPU, at any checkout) writes ``benchmarks/results/ring_src_LABEL.json``:
  ``schedule=None``'s GEMV kernel for each product of :data:`PRODUCTS` (source, grid, block, shared memory, slices).
* ``python benchmarks/gemv_ring.py time OUT.json LABEL...`` (GPU) times each dumped kernel alone into its split-K
  workspace (CUDA events, L2 flushed before each call, median of 20), the cp.async prototype's kernel alone (D chunks
  of U rows of B in flight per thread in shared memory, one commit group per chunk, no barrier: each thread reads only
  the vectors it copied), then ``tiledsl.gemm`` end to end with the checkout it runs on and ``cupy.matmul`` (cuBLAS).
  Every kernel is checked against a float64 product (the workspace's slices summed; C poisoned with NaN first).

Measured on the H200, 2026-12-03 (``benchmarks/results/gemv_ring_h200_2026-12-03.json``; labels ``head`` = commit
74f230b, the refill inside the slice guard since 0516e6d; ``fix`` = the refill outside it, the ring zeroed; ``tail`` =
whole rounds without a guard and a guarded tail, which spills 60 bytes under the 128-register cap): the GEMV kernel of
16×14336×4096 134.9 / 82.0 / 91.1 µs, the cp.async ring (4 chunks of 4 rows) 79.6 µs; docs/gemm.md, "The ring of B
outside the guard". The prototype stages A 4 wide: slices a multiple of 4 deep and lda a multiple of 4, as for
:data:`PRODUCTS`.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

PRODUCTS = [(16, 14336, 4096), (8, 14336, 4096), (16, 4096, 14336), (16, 28672, 4096), (16, 128256, 4096),
            (8, 128256, 4096), (16, 4096, 4096), (16, 11008, 4096), (12, 14336, 4096), (8, 4096, 4096),
            (16, 768, 768), (12, 2304, 768)]
"""(M, N, K) of x @ W (float32, row-major x and W): LLM-set weights at 8, 12 and 16 rows, where ``schedule=None``
stages A (``smem_a``)."""

RESULTS = Path(__file__).resolve().parent / "results"

PROTO = r"""
__device__ __forceinline__ void copy16(void* dst, const void* src) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wait_group() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

// partial sums of K slice blockIdx.y into W[blockIdx.y][M][N]; 128 threads of 4 columns; rows of A staged as At[k][m]
extern "C" __global__ void __launch_bounds__(128, 4)
gemv_cp_ring(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ W,
             int M, int N, int K, long long lda, long long ldb, int depth) {
  extern __shared__ float4 smem[];
  float4* const ring = smem;                       // [D * U][128]: D chunks of U rows of B per thread
  float4* const at4 = smem + D * U * 128;          // [depth][BM / 4]
  float* const at = reinterpret_cast<float*>(at4);
  const int k_begin = min(K, (int)blockIdx.y * depth), n_k = min(K, k_begin + depth) - k_begin;
  const int row0 = blockIdx.z * BM, tid = threadIdx.x, gn = (blockIdx.x * 128 + tid) * 4;
  const float* const b_col = B + (long long)k_begin * ldb + (gn < N ? gn : N - 4);
  W += (long long)blockIdx.y * M * N;
  float acc[BM][4] = {};
  if (n_k > 0) {
    #pragma unroll
    for (int c = 0; c < D - 1; ++c) {              // the first D - 1 chunks in flight
      #pragma unroll
      for (int u = 0; u < U; ++u)
        if (c * U + u < n_k) copy16(&ring[(c * U + u) * 128 + tid], b_col + (long long)(c * U + u) * ldb);
      commit();
    }
    for (int i = tid; i < BM * (n_k / 4); i += 128) {  // stage A, rows past M zero
      const int m = i % BM, kv = i / BM, gm = row0 + m;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (gm < M) v = *reinterpret_cast<const float4*>(A + (long long)gm * lda + k_begin + kv * 4);
      at[(kv * 4 + 0) * BM + m] = v.x; at[(kv * 4 + 1) * BM + m] = v.y;
      at[(kv * 4 + 2) * BM + m] = v.z; at[(kv * 4 + 3) * BM + m] = v.w;
    }
    __syncthreads();
    int slot = 0;
    for (int k0 = 0; k0 < n_k; k0 += U) {
      wait_group<D - 2>();                          // chunk k0 / U has landed (this thread's own copies)
      const int kr = k0 + (D - 1) * U, refill = slot == 0 ? D - 1 : slot - 1;  // the chunk read last round
      #pragma unroll
      for (int u = 0; u < U; ++u)
        if (kr + u < n_k) copy16(&ring[(refill * U + u) * 128 + tid], b_col + (long long)(kr + u) * ldb);
      commit();
      #pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k0 + u < n_k) {
          const float4 bv = ring[(slot * U + u) * 128 + tid];
          const float b[4] = {bv.x, bv.y, bv.z, bv.w};
          #pragma unroll
          for (int q = 0; q < BM / 4; ++q) {
            const float4 a = at4[(k0 + u) * (BM / 4) + q];
            const float a4[4] = {a.x, a.y, a.z, a.w};
            #pragma unroll
            for (int r = 0; r < 4; ++r)
              #pragma unroll
              for (int j = 0; j < 4; ++j) acc[4 * q + r][j] += a4[r] * b[j];
          }
        }
      }
      slot = slot == D - 1 ? 0 : slot + 1;
    }
  }
  if (gn < N) {
    #pragma unroll
    for (int m = 0; m < BM; ++m) {
      if (row0 + m >= M) break;
      *reinterpret_cast<float4*>(W + (long long)(row0 + m) * N + gn) =
          make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
    }
  }
}
"""


def dump(label: str) -> Path:
    """Write ``schedule=None``'s GEMV kernel for each of :data:`PRODUCTS` (H200 target) to ``ring_src_LABEL.json``."""
    from tiledsl.gemm.emit import emit_gemm
    from tiledsl.gemm.family import default_schedule
    from tiledsl.gemm.kernel_plan import grid
    from tiledsl.gemm.op import GemmOp
    from tiledsl.target import Target

    target = Target.known("H200")
    out = {}
    for m, n, k in PRODUCTS:
        op = GemmOp(m=m, n=n, k=k)
        s = default_schedule(op, target)
        ks = emit_gemm(op, s)
        out[f"{m}x{n}x{k}"] = dict(name=ks.name, source=ks.source, block=ks.block, smem=ks.dynamic_smem_bytes,
                                   grid=grid(op, s, target.sm_count), split=s.split_k, schedule=str(s))
    path = RESULTS / f"ring_src_{label}.json"
    path.write_text(json.dumps(out))
    return path


def _proto(bm: int, d: int, u: int):
    import cupy as cp

    return cp.RawModule(code=f"#define BM {bm}\n#define D {d}\n#define U {u}\n" + PROTO,
                        options=("-std=c++17",)).get_function("gemv_cp_ring")


def _kernel_alone(row: dict, name: str, fn, operands: tuple, launch: tuple, tail_args: tuple) -> None:
    """Run ``fn`` once into a NaN-poisoned split-K workspace, record its error against the float64 product (its
    slices summed) and its median time alone as ``row[name + "_err"]`` / ``row[name + "_ms"]``."""
    import cupy as cp
    import numpy as np

    from tiledsl.timing import time_gpu

    a, b, ref, scale = operands
    grid, block, smem, split = launch
    (m, k), n = a.shape, b.shape[1]
    ws = cp.full((split, m, n), cp.nan, cp.float32)
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    args = (a, b, ws, np.int32(m), np.int32(n), np.int32(k), np.int64(k), np.int64(n)) + tail_args

    def run():
        fn(tuple(grid), tuple(block), args, shared_mem=smem)
    run()
    cp.cuda.Device().synchronize()
    row[name + "_err"] = float(cp.abs(ws.sum(0, dtype=cp.float64) - ref).max()) / scale
    row[name + "_ms"] = time_gpu(run, repeat=20).median_ms


def _measure(m: int, n: int, k: int, dumps: dict, copy: float, rng) -> dict:
    """One product's row: each dumped kernel and the prototype alone, then the call and cuBLAS."""
    import cupy as cp
    import numpy as np

    import tiledsl
    from tiledsl.timing import time_gpu

    key = f"{m}x{n}x{k}"
    a = rng.standard_normal((m, k), dtype=cp.float32)
    b = rng.standard_normal((k, n), dtype=cp.float32)
    ref = a.astype(cp.float64) @ b.astype(cp.float64)
    operands = (a, b, ref, float(cp.abs(ref).max()))
    row = dict(m=m, n=n, k=k, mib=4 * (n * k + m * k + m * n) / 2**20)
    for lab, d in dumps.items():
        e = d[key]
        fn = cp.RawModule(code=e["source"], options=("-std=c++17",)).get_function(e["name"])
        _kernel_alone(row, lab, fn, operands, (e["grid"], e["block"], e["smem"], e["split"]),
                      (np.int64(n), np.float32(1.0)))
    split = next(iter(dumps.values()))[key]["split"]
    depth = -(-k // split)
    depth = -(-depth // 8) * 8
    bm = 16 if m > 8 else 8
    for d_, u_ in ((4, 4), (6, 4)):
        smem = (d_ * u_ * 128 + depth * bm // 4) * 16
        grid = (-(-n // 512), -(-k // depth), -(-m // bm))
        _kernel_alone(row, f"cp{d_}x{u_}", _proto(bm, d_, u_), operands, (grid, (128, 1, 1), smem, grid[1]),
                      (np.int32(depth),))
    c = cp.full((m, n), cp.nan, cp.float32)
    tiledsl.gemm(a, b, c)
    cp.cuda.Device().synchronize()
    row["call_err"] = float(cp.abs(c - ref).max()) / operands[3]
    row["call_ms"] = time_gpu(lambda: tiledsl.gemm(a, b, c), repeat=20).median_ms
    row["cublas_ms"] = time_gpu(lambda: cp.matmul(a, b), repeat=20).median_ms
    row["call_copy_share"] = row["mib"] * 2**20 / row["call_ms"] / 1e6 / copy
    return row


def time_all(out: str, labels: list[str]) -> None:
    """Time every dumped kernel of ``labels``, the prototype and the end-to-end call per product; write ``out``."""
    import cupy as cp
    from beside import copy_gbps, gpu_name

    dumps = {lab: json.loads((RESULTS / f"ring_src_{lab}.json").read_text()) for lab in labels}
    copy = copy_gbps()
    print(f"device-to-device copy {copy:.0f} GB/s", flush=True)
    rng = cp.random.default_rng(5)
    rows = []
    for m, n, k in PRODUCTS:
        row = _measure(m, n, k, dumps, copy, rng)
        worst = max(v for name, v in row.items() if name.endswith("_err"))
        if not worst < 1e-5:
            sys.exit(f"{m}x{n}x{k}: relative error {worst:.2e} (see {row})")
        rows.append(row)
        alone = "  ".join(f"{name[:-3]} {v * 1e3:6.1f}" for name, v in row.items()
                          if name.endswith("_ms") and name not in ("call_ms", "cublas_ms"))
        print(f"{m}x{n}x{k:<6d} alone (us): {alone} | call {row['call_ms'] * 1e3:6.1f} us "
              f"({row['call_copy_share']:.2f} of the copy), cuBLAS {row['cublas_ms'] * 1e3:6.1f} us, "
              f"x{row['cublas_ms'] / row['call_ms']:.2f}", flush=True)
        cp.get_default_memory_pool().free_all_blocks()
    meta = dict(command="python benchmarks/gemv_ring.py time " + " ".join([out, *labels]), gpu=gpu_name(),
                copy_gbps=copy, labels=labels, date=datetime.date.today().isoformat())
    Path(out).write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "dump":
        print(dump(sys.argv[2]))
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "time":
        from gpu_check import gpu_or_exit

        gpu_or_exit("gemv_ring.py")
        time_all(sys.argv[2], sys.argv[3:])
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    raise SystemExit(main())
