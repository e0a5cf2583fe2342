// tiledsl reduce: sum over the middle axis of the (outer, length, inner) view, contiguous
// input float32, accumulate float, output float32; sizes are run-time arguments
// schedule: {"block": 256, "col_rows": 0, "combine": "two_pass", "grid": 0, "items_per_thread": 4, "row_threads": 0, "strategy": "warp_shuffle", "vec": 8}

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
constexpr int V = 4;  // effective elements per load (<= 16 bytes)
typedef int idx_t;        // loop indices along the reduced axis: 32-bit (length < 2^30)
constexpr int GROUP_THREADS = 256;  // threads reducing one segment (a block (or split blocks))

// ---- element type, accumulator, vector of V elements (one load) ----
typedef float acc_t;
struct alignas(16) vec_t { float e[V]; };
__device__ __forceinline__ acc_t load_acc(float v) { const acc_t a = (acc_t)(v); return a; }
__device__ __forceinline__ acc_t identity() { return (acc_t)0; }
__device__ __forceinline__ acc_t combine(acc_t a, acc_t b) { return a + b; }
__device__ __forceinline__ float finalize(acc_t a, long long length) { return a; }
// warp shuffle (butterfly): every lane ends with the combine of its group of `width` lanes
__device__ __forceinline__ acc_t warp_reduce(acc_t v, int width) {
  #pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    if (off < width) v = combine(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
// block combine, strategy warp_shuffle: one value per thread in, the block's value in thread 0 out
__device__ __forceinline__ acc_t block_reduce(acc_t v) {
  __shared__ acc_t warp_vals[BLOCK / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_reduce(v, 32);
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  v = lane < BLOCK / 32 ? warp_vals[lane] : identity();
  if (warp == 0) v = warp_reduce(v, BLOCK / 32);
  __syncthreads();  // warp_vals may be reused by the next call
  return v;
}

// at least 4 resident blocks per SM (1024 threads: bytes in flight), registers up to 64 per thread (64 bytes of loads in flight per thread)
extern "C" __global__ void __launch_bounds__(256, 4)
tiledsl_reduce_sum_f32f32_contiguous_v4_warp_shuffle_a8c596c6(const float* __restrict__ x, float* __restrict__ out, acc_t* __restrict__ partials,
    unsigned int* __restrict__ tickets, long long segments, long long length, long long inner, long long col_tiles, int split) {
  // ---- block -> (segment, part): split blocks share one segment ----
  const long long segment = blockIdx.x / split;     // 32-bit division: the grid is below 2^31
  const long long part = blockIdx.x % split;
  const idx_t gt = (idx_t)part * BLOCK + threadIdx.x;   // thread index within the segment
  const idx_t gstride = (idx_t)split * BLOCK;
  acc_t acc[ITEMS_PER_THREAD];  // independent accumulators (one per load in flight)
  #pragma unroll
  for (int u = 0; u < ITEMS_PER_THREAD; ++u) acc[u] = identity();
  {
    // ---- stage 1: load and accumulate this thread's elements of the segment ----
    const float* const seg = x + segment * length;
    // scalar head up to the first sizeof(vec_t)-aligned element, vector body, scalar tail
    const idx_t head = (idx_t)min(length, (long long)((sizeof(vec_t) - reinterpret_cast<unsigned long long>(seg) % sizeof(vec_t)) % sizeof(vec_t) / sizeof(seg[0])));
    const idx_t len = (idx_t)length;
    const idx_t nvec = (len - head) / V;
    const idx_t tail = head + nvec * V;
    const vec_t* const body = reinterpret_cast<const vec_t*>(seg + head);
    #pragma unroll 1
    for (idx_t i = gt; i < head; i += gstride) acc[0] = combine(acc[0], load_acc(seg[i]));
    #pragma unroll 1
    for (idx_t i = tail + gt; i < len; i += gstride) acc[0] = combine(acc[0], load_acc(seg[i]));
    idx_t j = gt;
    // ITEMS_PER_THREAD independent vector loads of body are issued before any is combined (bytes in flight)
    #pragma unroll 1  // ITEMS_PER_THREAD is the unroll; no compiler trip-count arithmetic
    for (; j + (ITEMS_PER_THREAD - 1) * gstride < nvec; j += ITEMS_PER_THREAD * gstride) {
      vec_t v[ITEMS_PER_THREAD];
      #pragma unroll
      for (int u = 0; u < ITEMS_PER_THREAD; ++u) v[u] = body[j + u * gstride];
      #pragma unroll
      for (int u = 0; u < ITEMS_PER_THREAD; ++u)
        #pragma unroll
        for (int e = 0; e < V; ++e) acc[u] = combine(acc[u], load_acc(v[u].e[e]));
    }
    #pragma unroll 1
    for (; j < nvec; j += gstride) {
      const vec_t v = body[j];
      #pragma unroll
      for (int e = 0; e < V; ++e) acc[0] = combine(acc[0], load_acc(v.e[e]));
    }
  }
  #pragma unroll
  for (int u = 1; u < ITEMS_PER_THREAD; ++u) acc[0] = combine(acc[0], acc[u]);
  // ---- stage 2: block combine (strategy) ----
  const acc_t total = block_reduce(acc[0]);
  if (split == 1) {
    if (threadIdx.x == 0) out[segment] = finalize(total, length);
    return;
  }
  // ---- stage 3: blocks of one segment; the last block to take a ticket finishes ----
  __shared__ bool am_last;
  if (threadIdx.x == 0) {
    partials[segment * split + part] = total;
    __threadfence();  // publish before taking the ticket
    am_last = atomicAdd(&tickets[segment], 1u) == (unsigned int)split - 1;
  }
  __syncthreads();
  if (!am_last) return;
  __threadfence();
  // every block of this segment has taken its ticket: leave it zero for the next launch (no memset)
  if (threadIdx.x == 0) tickets[segment] = 0u;
  // two_pass: reduce the split partials in a fixed order (same bits every run)
  const volatile acc_t* const p = partials + segment * split;
  acc_t a = identity();
  for (long long i = threadIdx.x; i < split; i += BLOCK) a = combine(a, p[i]);
  a = block_reduce(a);
  if (threadIdx.x == 0) out[segment] = finalize(a, length);
}
