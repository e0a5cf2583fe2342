"""Reduction emitter: a pure function (ReduceOp, ReduceSchedule) -> KernelSource, and the launch plan.

Two kernel shapes (the reduction ladder and coalescing, ``docs/design.md``, "Background"):

* **contiguous** (``inner == 1``: full reductions and row reductions). A group of ``GROUP_THREADS``
  threads owns one segment (row): a sub-warp/warp per short row, or ``split`` blocks per long row / the
  whole input. Stages: (1) scalar head up to the first 16-byte boundary of the row, then
  ``ITEMS_PER_THREAD`` vector loads in flight per thread, then a scalar tail; (2) the block combine of the
  strategy (v1 atomics, v2–v4 shared-memory trees, v6 warp shuffles); (3) blocks of one segment combined
  by the last block to finish (``two_pass``: fixed-order partials) or by atomics; (4) finalize
  (mean: ÷ length, norm2: sqrt) and store.
* **strided** (``inner > 1``: column reductions). ``TX`` neighbouring threads read ``V`` adjacent columns
  each (coalesced), ``TY`` threads walk the reduced axis; rows of a block are combined in shared memory in
  a fixed order, then blocks of one column tile as above.

Offsets of segments are 64-bit (``long long``), and so are loop indices along the reduced axis when it
has 2^30 or more elements (else 32-bit, which keeps 64-bit division out of the loops): more than 2^31
elements work.
"""

from __future__ import annotations

import json

from .. import dtypes
from .. import rules as R
from ..codegen.prelude import helpers_for
from ..codegen.writer import Writer
from ..compile import KernelSource
from ..planning import render_params
from .kernel_plan import (
    LaunchPlan,
    acc_numpy_dtype,
    column_threads,
    group_threads,
    identity_value,
    kernel_name,
    launch_plan,
    min_blocks,
    plan_reduce,
)
from .op import ReduceOp
from .schedule import REDUCE_RULES, STRATEGIES, ReduceSchedule, vec_width

plan = launch_plan  # the former name of launch_plan

_IDX32_LIMIT = 1 << 30  # below it, loop indices along the reduced axis (plus strides) fit in an int


# ---- emitter ----
def emit_reduce(op: ReduceOp, s: ReduceSchedule) -> KernelSource:
    """Emit the CUDA C of ``op`` mapped by ``s``. Pure: same inputs, same text.

    Kernel arguments: ``(const T* x, OUT* out, ACC* partials, unsigned* tickets, long long segments,
    long long length, long long inner, long long col_tiles, int split)`` (:attr:`Plan.params`); launch
    with :func:`~tiledsl.reduce.kernel_plan.plan_reduce`.

    Raises:
        ScheduleError: ``s`` breaks a rule that needs the op (rule ``strided_needs_loop``).
    """
    p = plan_reduce(op, s)  # checks the op-scope rules
    din, dout, dacc = dtypes.get(op.dtype), dtypes.get(op.out_dtype), dtypes.get(op.acc_dtype)
    acc_t = dacc.acc_c_type
    v = p.width("x")
    name = p.kernel_name
    w = Writer()
    what = {"sum": "sum", "mean": "mean", "max": "max (NaN propagates)", "min": "min (NaN propagates)",
            "prod": "product", "norm2": "sqrt of the sum of squares"}[op.op]
    w(f"// tiledsl reduce: {what} over the middle axis of the (outer, length, inner) view, {op.kind}",
      f"// input {op.dtype}, accumulate {acc_t}, output {op.out_dtype}; sizes are run-time arguments",
      f"// schedule: {json.dumps(s.to_dict(), sort_keys=True)}")
    prelude = helpers_for(op.dtype, op.out_dtype)
    if prelude:
        w(prelude.rstrip("\n"))
    w.blank()
    _constants(w, op, s, v)
    w.blank()
    _functions(w, op, s, din, dout, acc_t, v)
    w.blank()
    mb = p.min_blocks
    w(f"// at least {mb} resident blocks per SM ({mb * s.block} threads: bytes in flight), registers up to "
      f"{p.max_registers} per thread ({s.items_per_thread * v * din.itemsize} bytes of "
      "loads in flight per thread)")
    w(f'extern "C" __global__ void __launch_bounds__({s.block}, {mb})')
    with w.block(f"{name}({render_params(p.params, breaks=(3,))})"):
        if op.kind == "contiguous":
            _contiguous_body(w, op, s)
        else:
            _strided_body(w, op, s)
    return KernelSource(name=name, source=w.text(), block=(s.block, 1, 1))


def _constants(w: Writer, op: ReduceOp, s: ReduceSchedule, v: int) -> None:
    w("// ---- schedule (tiledsl.ReduceSchedule) ----")
    consts = [
        ("BLOCK", s.block, "block: threads per block"),
        ("VEC", s.vec, "vec: requested elements per load"),
        ("ITEMS_PER_THREAD", s.items_per_thread, "items_per_thread: vector loads in flight per thread"),
        ("STRATEGY", s.strategy_index, f"strategy: {s.strategy} ({', '.join(STRATEGIES)})"),
        ("GRID", s.grid, "grid: blocks (0 = auto, chosen at launch)"),
        ("COMBINE", s.combine_index, f"combine: {s.combine} (0 two_pass, 1 atomic)"),
        ("ROW_THREADS", s.row_threads, "row_threads: threads per contiguous row (0 = auto)"),
        ("COL_ROWS", s.col_rows, "col_rows: threads along a strided reduced axis (0 = auto)"),
    ]
    width = max(len(f"constexpr int {n} = {val};") for n, val, _ in consts)
    for n, val, doc in consts:
        w(f"{f'constexpr int {n} = {val};':<{width}}  // {doc}")
    for line in R.static_asserts(REDUCE_RULES):
        w(line)
    w("// ---- resolved for this op ----",
      f"constexpr int V = {v};  // effective elements per load (<= 16 bytes{', <= op.align, divides inner' if op.kind == 'strided' else ''})")
    if op.length < _IDX32_LIMIT:
        w("typedef int idx_t;        // loop indices along the reduced axis: 32-bit (length < 2^30)")
    else:
        w("typedef long long idx_t;  // loop indices along the reduced axis: 64-bit (length >= 2^30)")
    if op.kind == "contiguous":
        gt = group_threads(op, s)
        w(f"constexpr int GROUP_THREADS = {gt};  // threads reducing one segment "
          f"({'a block (or split blocks)' if gt == s.block else 'lanes of one warp'})")
        if gt < s.block:
            w("constexpr int ROWS_PER_BLOCK = BLOCK / GROUP_THREADS;")
    else:
        tx, ty = column_threads(op, s)
        w(f"constexpr int TX = {tx};  // threads across columns (each reads V adjacent columns)",
          f"constexpr int TY = {ty};  // threads along the reduced axis",
          "static_assert(TX * TY == BLOCK, \"column mapping covers the block\");",
          "static_assert(TX * V <= BLOCK, \"one thread per column of the tile (rule column_tile_fits_block)\");")


def _functions(w: Writer, op: ReduceOp, s: ReduceSchedule, din: dtypes.DType, dout: dtypes.DType,
               acc_t: str, v: int) -> None:
    t = din.c_type
    is_int = acc_t == "long long"
    w("// ---- element type, accumulator, vector of V elements (one load) ----",
      f"typedef {acc_t} acc_t;",
      f"struct alignas({v * din.itemsize}) vec_t {{ {t} e[V]; }};")
    conv = f"{din.load_fn}(v)" if din.load_fn else "v"
    body = f"const acc_t a = (acc_t)({conv}); return {'a * a' if op.op == 'norm2' else 'a'};"
    note = "  // norm2 sums squares" if op.op == "norm2" else ""
    w(f"__device__ __forceinline__ acc_t load_acc({t} v) {{ {body} }}{note}")
    ident = _identity_c(op.op, acc_t)
    w(f"__device__ __forceinline__ acc_t identity() {{ return {ident}; }}")
    fmax, fmin = ("fmaxf", "fminf") if acc_t == "float" else ("fmax", "fmin")
    comb = {"sum": "a + b", "mean": "a + b", "norm2": "a + b", "prod": "a * b",
            "max": "a > b ? a : b" if is_int else f"a != a ? a : (b != b ? b : {fmax}(a, b))  // a NaN wins",
            "min": "a < b ? a : b" if is_int else f"a != a ? a : (b != b ? b : {fmin}(a, b))  // a NaN wins"}[op.op]
    if comb.endswith("wins"):
        expr, note = comb.split("  //")
        w(f"__device__ __forceinline__ acc_t combine(acc_t a, acc_t b) {{ return {expr}; }}  //{note}")
    else:
        w(f"__device__ __forceinline__ acc_t combine(acc_t a, acc_t b) {{ return {comb}; }}")
    fin = {"mean": "a / (acc_t)length", "norm2": ("sqrtf(a)" if acc_t == "float" else "sqrt(a)")}.get(op.op, "a")
    w(f"__device__ __forceinline__ {dout.c_type} finalize(acc_t a, long long length) "
      f"{{ return {dout.from_acc(fin)}; }}")
    block_level = op.kind == "contiguous" and group_threads(op, s) == s.block
    if (block_level and (s.strategy == "atomic" or s.combine == "atomic")) or (
            op.kind == "strided" and s.combine == "atomic"):
        _atomic_combine(w, op.op, acc_t)
    if op.kind == "contiguous":
        _block_reduce(w, op, s)


def _identity_c(op: str, acc_t: str) -> str:
    if op in ("sum", "mean", "norm2"):
        return "(acc_t)0"
    if op == "prod":
        return "(acc_t)1"
    inf = {"float": ("__int_as_float(0x7f800000)", "__int_as_float(0xff800000)"),
           "double": ("__longlong_as_double(0x7ff0000000000000LL)", "__longlong_as_double(0xfff0000000000000LL)"),
           "long long": ("9223372036854775807LL", "(-9223372036854775807LL - 1)")}[acc_t]
    return inf[1] if op == "max" else inf[0]


def _atomic_combine(w: Writer, op: str, acc_t: str) -> None:
    w("// combine v into *p with a global atomic (native add, else a compare-and-swap loop)")
    with w.block("__device__ __forceinline__ void atomic_combine(acc_t* p, acc_t v)"):
        if op in ("sum", "mean", "norm2"):
            if acc_t == "long long":
                w("atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);")
            else:
                w("atomicAdd(p, v);")
            return
        bits, to_bits, from_bits = {
            "float": ("unsigned int", "__float_as_uint", "__uint_as_float"),
            "double": ("unsigned long long", "(unsigned long long)__double_as_longlong", "__longlong_as_double"),
            "long long": ("unsigned long long", "(unsigned long long)", "(long long)")}[acc_t]
        w(f"{bits}* const q = reinterpret_cast<{bits}*>(p);",
          f"{bits} old = *q, assumed;")
        with w.block("do", "} while (old != assumed);"):
            w("assumed = old;",
              f"old = atomicCAS(q, assumed, {to_bits}(combine({from_bits}(assumed), v)));")


def _block_reduce(w: Writer, op: ReduceOp, s: ReduceSchedule) -> None:
    """The strategy's combine of one value per thread into thread 0 (ladder v2, v3, v4/v5, v6)."""
    st = s.strategy
    uses_shuffle = st == "warp_shuffle"
    if uses_shuffle:
        w("// warp shuffle (butterfly): every lane ends with the combine of its group of `width` lanes")
        with w.block("__device__ __forceinline__ acc_t warp_reduce(acc_t v, int width)"):
            w("#pragma unroll",
              "for (int off = 16; off > 0; off >>= 1)",
              "  if (off < width) v = combine(v, __shfl_xor_sync(0xffffffffu, v, off));",
              "return v;")
    if group_threads(op, s) < s.block:
        return
    w(f"// block combine, strategy {st}: one value per thread in, the block's value in thread 0 out")
    with w.block("__device__ __forceinline__ acc_t block_reduce(acc_t v)"):
        if uses_shuffle:
            w("__shared__ acc_t warp_vals[BLOCK / 32];",
              "const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;",
              "v = warp_reduce(v, 32);",
              "if (lane == 0) warp_vals[warp] = v;",
              "__syncthreads();",
              "v = lane < BLOCK / 32 ? warp_vals[lane] : identity();",
              "if (warp == 0) v = warp_reduce(v, BLOCK / 32);",
              "__syncthreads();  // warp_vals may be reused by the next call",
              "return v;")
            return
        w("__shared__ acc_t sdata[BLOCK];",
          "const int tid = threadIdx.x;",
          "sdata[tid] = v;",
          "__syncthreads();")
        if st == "smem_interleaved":
            w("// v2: interleaved pairs, tid % (2*stride) == 0 (half of each warp idles; divergence)",
              "for (int stride = 1; stride < BLOCK; stride *= 2) {",
              "  if (tid % (2 * stride) == 0) sdata[tid] = combine(sdata[tid], sdata[tid + stride]);",
              "  __syncthreads();",
              "}")
        elif st == "smem_contiguous":
            w("// v3: contiguous threads, idx = 2*stride*tid (no divergence; bank conflicts grow with stride)",
              "for (int stride = 1; stride < BLOCK; stride *= 2) {",
              "  const int idx = 2 * stride * tid;",
              "  if (idx < BLOCK) sdata[idx] = combine(sdata[idx], sdata[idx + stride]);",
              "  __syncthreads();",
              "}")
        else:
            w("// v4/v5: sequential addressing, stride halves from BLOCK/2 (conflict-free)",
              "for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {",
              "  if (tid < stride) sdata[tid] = combine(sdata[tid], sdata[tid + stride]);",
              "  __syncthreads();",
              "}")
        w("const acc_t r = sdata[0];",
          "__syncthreads();  // sdata may be reused by the next call",
          "return r;")


def _emit_loads(w: Writer, ptr: str, index: str, stride: str, bound: str, sink: str) -> None:
    """The main loop: ITEMS_PER_THREAD vector loads in flight, then the remainder one vector at a time.

    ``sink(u, e)`` is the C statement consuming element e of load u (``v[u].e[e]``).
    """
    w(f"// ITEMS_PER_THREAD independent vector loads of {ptr} are issued before any is combined (bytes in flight)",
      "#pragma unroll 1  // ITEMS_PER_THREAD is the unroll; no compiler trip-count arithmetic")
    with w.block(f"for (; {index} + (ITEMS_PER_THREAD - 1) * {stride} < {bound}; "
                 f"{index} += ITEMS_PER_THREAD * {stride})"):
        w("vec_t v[ITEMS_PER_THREAD];",
          "#pragma unroll",
          f"for (int u = 0; u < ITEMS_PER_THREAD; ++u) v[u] = {ptr}[{index} + u * {stride}];",
          "#pragma unroll",
          "for (int u = 0; u < ITEMS_PER_THREAD; ++u)",
          "  #pragma unroll",
          f"  for (int e = 0; e < V; ++e) {sink.format(u='u', e='e')}")
    w("#pragma unroll 1")
    with w.block(f"for (; {index} < {bound}; {index} += {stride})"):
        w(f"const vec_t v = {ptr}[{index}];",
          "#pragma unroll",
          f"for (int e = 0; e < V; ++e) {sink.format(u='0', e='e').replace('v[0]', 'v')}")


def _contiguous_body(w: Writer, op: ReduceOp, s: ReduceSchedule) -> None:
    gt = group_threads(op, s)
    per_elem_atomic = s.strategy == "atomic"
    if gt < s.block:
        w("// ---- thread -> row: GROUP_THREADS lanes of a warp per row, ROWS_PER_BLOCK rows per block ----",
          "const long long segment = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / GROUP_THREADS;",
          "const idx_t gt = threadIdx.x % GROUP_THREADS;   // lane within the row's group",
          "const idx_t gstride = GROUP_THREADS;",
          "const bool valid = segment < segments;             // no early return: shuffles need the warp")
    else:
        w("// ---- block -> (segment, part): split blocks share one segment ----",
          "const long long segment = blockIdx.x / split;     // 32-bit division: the grid is below 2^31",
          "const long long part = blockIdx.x % split;",
          "const idx_t gt = (idx_t)part * BLOCK + threadIdx.x;   // thread index within the segment",
          "const idx_t gstride = (idx_t)split * BLOCK;")
    sink_acc = "acc[{u}] = combine(acc[{u}], load_acc(v[{u}].e[{e}]));"
    sink_atomic = "atomic_combine(&partials[segment], load_acc(v[{u}].e[{e}]));"
    sink = sink_atomic if per_elem_atomic else sink_acc
    if not per_elem_atomic:
        w("acc_t acc[ITEMS_PER_THREAD];  // independent accumulators (one per load in flight)",
          "#pragma unroll",
          "for (int u = 0; u < ITEMS_PER_THREAD; ++u) acc[u] = identity();")
    with w.block("if (valid)" if gt < s.block else ""):
        w("// ---- stage 1: load and accumulate this thread's elements of the segment ----",
          f"const {dtypes.get(op.dtype).c_type}* const seg = x + segment * length;")
        if vec_width(op, s) > 1:
            w("// scalar head up to the first sizeof(vec_t)-aligned element, vector body, scalar tail",
              "const idx_t head = (idx_t)min(length, (long long)((sizeof(vec_t) - "
              "reinterpret_cast<unsigned long long>(seg) % sizeof(vec_t)) % sizeof(vec_t) / sizeof(seg[0])));")
        else:
            w("const idx_t head = 0;  // V == 1: every element is aligned")
        w("const idx_t len = (idx_t)length;",
          "const idx_t nvec = (len - head) / V;",
          "const idx_t tail = head + nvec * V;",
          "const vec_t* const body = reinterpret_cast<const vec_t*>(seg + head);")
        one = sink.format(u="0", e="0").replace("v[0].e[0]", "seg[i]")
        w("#pragma unroll 1",
          f"for (idx_t i = gt; i < head; i += gstride) {one}",
          "#pragma unroll 1",
          f"for (idx_t i = tail + gt; i < len; i += gstride) {one}",
          "idx_t j = gt;")
        _emit_loads(w, "body", "j", "gstride", "nvec", sink)
    if not per_elem_atomic:
        w("#pragma unroll",
          "for (int u = 1; u < ITEMS_PER_THREAD; ++u) acc[0] = combine(acc[0], acc[u]);")
    if gt < s.block:
        w("// ---- stage 2: combine the row's lanes with shuffles; lane 0 of the group stores ----",
          "const acc_t total = warp_reduce(acc[0], GROUP_THREADS);",
          "if (valid && gt == 0) out[segment] = finalize(total, length);")
        return
    if per_elem_atomic:
        w("// ---- stage 2 (v1): every element already went to partials[segment] with an atomic ----",
          "__threadfence();",
          "__syncthreads();")
    else:
        w("// ---- stage 2: block combine (strategy) ----",
          "const acc_t total = block_reduce(acc[0]);")
        with w.block("if (split == 1)"):
            w("if (threadIdx.x == 0) out[segment] = finalize(total, length);",
              "return;")
    w("// ---- stage 3: blocks of one segment; the last block to take a ticket finishes ----",
      "__shared__ bool am_last;")
    with w.block("if (threadIdx.x == 0)"):
        if not per_elem_atomic:
            if s.combine == "two_pass":
                w("partials[segment * split + part] = total;")
            else:
                w("atomic_combine(&partials[segment], total);")
        w("__threadfence();  // publish before taking the ticket",
          "am_last = atomicAdd(&tickets[segment], 1u) == (unsigned int)split - 1;")
    w("__syncthreads();",
      "if (!am_last) return;",
      "__threadfence();",
      "// every block of this segment has taken its ticket: leave it zero for the next launch (no memset)",
      "if (threadIdx.x == 0) tickets[segment] = 0u;")
    if s.combine == "two_pass":
        w("// two_pass: reduce the split partials in a fixed order (same bits every run)",
          "const volatile acc_t* const p = partials + segment * split;",
          "acc_t a = identity();",
          "for (long long i = threadIdx.x; i < split; i += BLOCK) a = combine(a, p[i]);",
          "a = block_reduce(a);",
          "if (threadIdx.x == 0) out[segment] = finalize(a, length);")
    else:
        w("if (threadIdx.x == 0) out[segment] = finalize(((const volatile acc_t*)partials)[segment], length);")


def _strided_body(w: Writer, op: ReduceOp, s: ReduceSchedule) -> None:
    w("// ---- block -> (outer index, column tile, part); thread -> (column vector tx, row lane ty) ----",
      "const unsigned int group = blockIdx.x / split;     // 32-bit: the grid is below 2^31 blocks",
      "const unsigned int part = blockIdx.x % split;",
      "const long long o = group / (unsigned int)col_tiles, tile = group % (unsigned int)col_tiles;",
      "const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;",
      "const long long c0 = (tile * TX + tx) * V;        // first column of this thread (inner % V == 0)",
      "const bool active = c0 < inner;",
      "acc_t acc[V];",
      "#pragma unroll",
      "for (int e = 0; e < V; ++e) acc[e] = identity();")
    with w.block("if (active)"):
        w("// ---- stage 1: walk rows part*TY + ty, stride TY*split; a warp reads TX*V adjacent columns ----",
          f"const {dtypes.get(op.dtype).c_type}* const col = x + o * length * inner + c0;",
          "const idx_t len = (idx_t)length;",
          "const idx_t rstride = (idx_t)TY * split;",
          "idx_t r = (idx_t)part * TY + ty;")
        w("#pragma unroll 1  // ITEMS_PER_THREAD is the unroll; no compiler trip-count arithmetic")
        with w.block("for (; r + (ITEMS_PER_THREAD - 1) * rstride < len; r += ITEMS_PER_THREAD * rstride)"):
            w("vec_t v[ITEMS_PER_THREAD];",
              "#pragma unroll",
              "for (int u = 0; u < ITEMS_PER_THREAD; ++u)",
              "  v[u] = *reinterpret_cast<const vec_t*>(col + (long long)(r + u * rstride) * inner);",
              "#pragma unroll",
              "for (int u = 0; u < ITEMS_PER_THREAD; ++u)",
              "  #pragma unroll",
              "  for (int e = 0; e < V; ++e) acc[e] = combine(acc[e], load_acc(v[u].e[e]));")
        w("#pragma unroll 1")
        with w.block("for (; r < len; r += rstride)"):
            w("const vec_t v = *reinterpret_cast<const vec_t*>(col + (long long)r * inner);",
              "#pragma unroll",
              "for (int e = 0; e < V; ++e) acc[e] = combine(acc[e], load_acc(v.e[e]));")
    w("// ---- stage 2: combine the TY row lanes of the block in shared memory, in order ----",
      "__shared__ acc_t rows[TY][TX * V];",
      "#pragma unroll",
      "for (int e = 0; e < V; ++e) rows[ty][tx * V + e] = acc[e];",
      "__syncthreads();")
    with w.block("if (ty == 0 && active)"):
        w("for (int k = 1; k < TY; ++k)",
          "  #pragma unroll",
          "  for (int e = 0; e < V; ++e) acc[e] = combine(acc[e], rows[k][tx * V + e]);",
          "#pragma unroll",
          "for (int e = 0; e < V; ++e) rows[0][tx * V + e] = acc[e];")
    w("__syncthreads();",
      "// the block's TX*V column values are in rows[0]; consecutive threads take consecutive columns")
    with w.block("if (split == 1)"):
        with w.block("if (const int j = threadIdx.x; j < TX * V)"):
            w("const long long c = tile * TX * V + j;",
              "if (c < inner) out[o * inner + c] = finalize(rows[0][j], length);")
        w("return;")
    w("// ---- stage 3: blocks of one column tile; the last block to take a ticket finishes ----")
    with w.block("if (const int j = threadIdx.x; j < TX * V)"):
        if s.combine == "two_pass":
            w("partials[(long long)blockIdx.x * (TX * V) + j] = rows[0][j];  // blockIdx.x = group * split + part")
        else:
            w("const long long c = tile * TX * V + j;",
              "if (c < inner) atomic_combine(&partials[o * inner + c], rows[0][j]);")
    w("__threadfence();",
      "__syncthreads();",
      "__shared__ bool am_last;",
      "if (threadIdx.x == 0) am_last = atomicAdd(&tickets[group], 1u) == (unsigned int)split - 1;",
      "__syncthreads();",
      "if (!am_last) return;",
      "__threadfence();",
      "// every block of this column tile has taken its ticket: leave it zero for the next launch (no memset)",
      "if (threadIdx.x == 0) tickets[group] = 0u;",
      "const volatile acc_t* const p = partials;")
    with w.block("if (const int j = threadIdx.x; j < TX * V)"):
        w("const long long c = tile * TX * V + j;",
          "if (c >= inner) return;")
        if s.combine == "two_pass":
            w("// two_pass: the split partials of column c, in a fixed order",
              "acc_t a = identity();",
              "for (long long q = 0; q < split; ++q) a = combine(a, p[((long long)group * split + q) * (TX * V) + j]);",
              "out[o * inner + c] = finalize(a, length);")
        else:
            w("out[o * inner + c] = finalize(p[o * inner + c], length);")


__all__ = ["LaunchPlan", "acc_numpy_dtype", "column_threads", "emit_reduce", "group_threads", "identity_value",
           "kernel_name", "launch_plan", "min_blocks", "plan", "plan_reduce", "vec_width"]
