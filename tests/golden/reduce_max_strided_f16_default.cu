// tiledsl reduce: max (NaN propagates) over the middle axis of the (outer, length, inner) view, strided
// input float16, accumulate float, output float16; sizes are run-time arguments
// schedule: {"block": 256, "col_rows": 0, "combine": "two_pass", "grid": 0, "items_per_thread": 4, "row_threads": 0, "strategy": "warp_shuffle", "vec": 8}
// float16 / bfloat16 <-> float32, as raw 16-bit patterns (PTX cvt; round to nearest even)
__device__ __forceinline__ float tdsl_h2f(unsigned short h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ unsigned short tdsl_f2h(float f) {
  unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float tdsl_bf2f(unsigned short b) {
  return __uint_as_float(((unsigned int)b) << 16);
}
__device__ __forceinline__ unsigned short tdsl_f2bf(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // keep NaN quiet
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ---- schedule (tiledsl.ReduceSchedule) ----
constexpr int BLOCK = 256;           // block: threads per block
constexpr int VEC = 8;               // vec: requested elements per load
constexpr int ITEMS_PER_THREAD = 4;  // items_per_thread: vector loads in flight per thread
constexpr int STRATEGY = 5;          // strategy: warp_shuffle (atomic, smem_interleaved, smem_contiguous, smem_sequential, grid_stride, warp_shuffle)
constexpr int GRID = 0;              // grid: blocks (0 = auto, chosen at launch)
constexpr int COMBINE = 0;           // combine: two_pass (0 two_pass, 1 atomic)
constexpr int ROW_THREADS = 0;       // row_threads: threads per contiguous row (0 = auto)
constexpr int COL_ROWS = 0;          // col_rows: threads along a strided reduced axis (0 = auto)
static_assert((BLOCK == 32 || BLOCK == 64 || BLOCK == 128 || BLOCK == 256 || BLOCK == 512 || BLOCK == 1024), "rule block_power_of_two");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "rule vec_width");
static_assert(ITEMS_PER_THREAD >= 1 && ITEMS_PER_THREAD <= 16, "rule items_per_thread_range");
static_assert(GRID >= 0 && GRID <= 2147483647, "rule grid_range");
static_assert(STRATEGY != 0 || COMBINE == 1, "rule atomic_strategy_combines_atomically");
static_assert(STRATEGY >= 4 || GRID == 0, "rule grid_needs_grid_stride");
static_assert(ROW_THREADS == 0 || ROW_THREADS == BLOCK || (ROW_THREADS == 1 || ROW_THREADS == 2 || ROW_THREADS == 4 || ROW_THREADS == 8 || ROW_THREADS == 16 || ROW_THREADS == 32), "rule row_threads_shape");
static_assert(ROW_THREADS == 0 || ROW_THREADS == BLOCK || STRATEGY == 5, "rule sub_block_rows_use_shuffles");
static_assert(COL_ROWS == 0 || (COL_ROWS >= 1 && COL_ROWS <= 32 && BLOCK % COL_ROWS == 0), "rule col_rows_divide_block");
// ---- resolved for this op ----
constexpr int V = 8;  // effective elements per load (<= 16 bytes, <= op.align, divides inner)
typedef int idx_t;        // loop indices along the reduced axis: 32-bit (length < 2^30)
constexpr int TX = 16;  // threads across columns (each reads V adjacent columns)
constexpr int TY = 16;  // threads along the reduced axis
static_assert(TX * TY == BLOCK, "column mapping covers the block");
static_assert(TX * V <= BLOCK, "one thread per column of the tile (rule column_tile_fits_block)");

// ---- element type, accumulator, vector of V elements (one load) ----
typedef float acc_t;
struct alignas(16) vec_t { unsigned short e[V]; };
__device__ __forceinline__ acc_t load_acc(unsigned short v) { const acc_t a = (acc_t)(tdsl_h2f(v)); return a; }
__device__ __forceinline__ acc_t identity() { return __int_as_float(0xff800000); }
__device__ __forceinline__ acc_t combine(acc_t a, acc_t b) { return a != a ? a : (b != b ? b : fmaxf(a, b)); }  // a NaN wins
__device__ __forceinline__ unsigned short finalize(acc_t a, long long length) { return tdsl_f2h(a); }

// at least 4 resident blocks per SM (1024 threads: bytes in flight), registers up to 64 per thread (64 bytes of loads in flight per thread)
extern "C" __global__ void __launch_bounds__(256, 4)
tiledsl_reduce_max_f16f16_strided_v8_warp_shuffle_a8c596c6(const unsigned short* __restrict__ x, unsigned short* __restrict__ out, acc_t* __restrict__ partials,
    unsigned int* __restrict__ tickets, long long segments, long long length, long long inner, long long col_tiles, int split) {
  // ---- block -> (outer index, column tile, part); thread -> (column vector tx, row lane ty) ----
  const unsigned int group = blockIdx.x / split;     // 32-bit: the grid is below 2^31 blocks
  const unsigned int part = blockIdx.x % split;
  const long long o = group / (unsigned int)col_tiles, tile = group % (unsigned int)col_tiles;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  const long long c0 = (tile * TX + tx) * V;        // first column of this thread (inner % V == 0)
  const bool active = c0 < inner;
  acc_t acc[V];
  #pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = identity();
  if (active) {
    // ---- stage 1: walk rows part*TY + ty, stride TY*split; a warp reads TX*V adjacent columns ----
    const unsigned short* const col = x + o * length * inner + c0;
    const idx_t len = (idx_t)length;
    const idx_t rstride = (idx_t)TY * split;
    idx_t r = (idx_t)part * TY + ty;
    #pragma unroll 1  // ITEMS_PER_THREAD is the unroll; no compiler trip-count arithmetic
    for (; r + (ITEMS_PER_THREAD - 1) * rstride < len; r += ITEMS_PER_THREAD * rstride) {
      vec_t v[ITEMS_PER_THREAD];
      #pragma unroll
      for (int u = 0; u < ITEMS_PER_THREAD; ++u)
        v[u] = *reinterpret_cast<const vec_t*>(col + (long long)(r + u * rstride) * inner);
      #pragma unroll
      for (int u = 0; u < ITEMS_PER_THREAD; ++u)
        #pragma unroll
        for (int e = 0; e < V; ++e) acc[e] = combine(acc[e], load_acc(v[u].e[e]));
    }
    #pragma unroll 1
    for (; r < len; r += rstride) {
      const vec_t v = *reinterpret_cast<const vec_t*>(col + (long long)r * inner);
      #pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = combine(acc[e], load_acc(v.e[e]));
    }
  }
  // ---- stage 2: combine the TY row lanes of the block in shared memory, in order ----
  __shared__ acc_t rows[TY][TX * V];
  #pragma unroll
  for (int e = 0; e < V; ++e) rows[ty][tx * V + e] = acc[e];
  __syncthreads();
  if (ty == 0 && active) {
    for (int k = 1; k < TY; ++k)
      #pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = combine(acc[e], rows[k][tx * V + e]);
    #pragma unroll
    for (int e = 0; e < V; ++e) rows[0][tx * V + e] = acc[e];
  }
  __syncthreads();
  // the block's TX*V column values are in rows[0]; consecutive threads take consecutive columns
  if (split == 1) {
    if (const int j = threadIdx.x; j < TX * V) {
      const long long c = tile * TX * V + j;
      if (c < inner) out[o * inner + c] = finalize(rows[0][j], length);
    }
    return;
  }
  // ---- stage 3: blocks of one column tile; the last block to take a ticket finishes ----
  if (const int j = threadIdx.x; j < TX * V) {
    partials[(long long)blockIdx.x * (TX * V) + j] = rows[0][j];  // blockIdx.x = group * split + part
  }
  __threadfence();
  __syncthreads();
  __shared__ bool am_last;
  if (threadIdx.x == 0) am_last = atomicAdd(&tickets[group], 1u) == (unsigned int)split - 1;
  __syncthreads();
  if (!am_last) return;
  __threadfence();
  // every block of this column tile has taken its ticket: leave it zero for the next launch (no memset)
  if (threadIdx.x == 0) tickets[group] = 0u;
  const volatile acc_t* const p = partials;
  if (const int j = threadIdx.x; j < TX * V) {
    const long long c = tile * TX * V + j;
    if (c >= inner) return;
    // two_pass: the split partials of column c, in a fixed order
    acc_t a = identity();
    for (long long q = 0; q < split; ++q) a = combine(a, p[((long long)group * split + q) * (TX * V) + j]);
    out[o * inner + c] = finalize(a, length);
  }
}
