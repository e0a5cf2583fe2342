// tiledsl GEMV-style GEMM: C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C, few rows M
// dtype float32 in/out, float32 accumulation; A row-major, B col-major, C row-major
// schedule: {"bk": 8, "bm": 1, "bn": 128, "double_buffer": true, "kernel": "gemv", "min_blocks": 1, "mma": "fma", "rm": 8, "rn": 1, "smem_pad": 0, "split_k": 6, "split_k_fused": true, "stages": 2, "swizzle": 8, "unroll": 2, "vec": 4, "warp_specialize": false, "wm": 1, "wn": 1}

// ---- schedule (tiledsl.GemmSchedule, kernel='gemv') ----
constexpr int BM = 1;          // bm: rows of C per block (kept in registers)
constexpr int BN = 128;        // bn: threads per block
constexpr int BK = 8;          // bk: K slices start on multiples of it
constexpr int VEC = 4;         // vec: requested elements per load
constexpr int UNROLL = 2;      // unroll: K steps per thread in flight
constexpr int SPLIT_K = 6;     // split_k: K slices
constexpr int MMA = 0;         // mma='fma'
constexpr int KERNEL = 1;      // kernel='gemv'
constexpr int THREADS = 128;   // = bn
constexpr int MIN_BLOCKS = 1;  // min_blocks
constexpr int RM = 8;          // rm (unused)
constexpr int RN = 1;          // rn: columns per warp (column-major B)
constexpr int WM = 1;          // wm (unused)
constexpr int WN = 1;          // wn (unused)
constexpr int STAGES = 2;      // stages (unused)
constexpr int SMEM_PAD = 0;    // smem_pad (unused)
constexpr int SWIZZLE = 8;     // swizzle (unused)
constexpr int VA = 4, VB = 4, VC = 1;  // elements per load of A and B, per store of C (op alignment 4/4/4)
static_assert(BM >= 1 && BN >= 1 && BK >= 1, "rule positive_sizes");
static_assert(RM >= 1 && RN >= 1, "rule thread_tile_positive");
static_assert(BM <= 1024 && BN <= 1024 && BK <= 1024, "rule tile_sizes_bounded");
static_assert(RM <= 64 && RN <= 64, "rule thread_tile_bounded");
static_assert(WM >= 1 && WN >= 1 && WM <= 4096 && WN <= 4096, "rule warp_tile_positive");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "rule vec_width");
static_assert(MMA == 0 || MMA == 1 || MMA == 2, "rule mma_kind");
static_assert(KERNEL == 0 || KERNEL == 1, "rule kernel_kind");
static_assert(MMA == 0, "rule gemv_on_fma");
static_assert(BM <= 16, "rule gemv_rows");
static_assert(BN % 32 == 0 && BN >= 32, "rule gemv_block_threads");
static_assert(STAGES >= 1 && STAGES <= 8, "rule stages_range");
static_assert(STAGES <= 2, "rule gemv_stages_at_most_2");
static_assert(KERNEL == 1 && SPLIT_K > 1, "rule split_k_fused_on_gemv");
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
static_assert(SMEM_PAD >= 0 && SMEM_PAD <= 64 && SMEM_PAD % 4 == 0, "rule smem_pad_keeps_16_bytes");
static_assert(RM * RN <= 128, "rule accumulators_fit_registers");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 1024, "rule gemv_split_k_range");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "rule min_blocks_range");

// split-K, fused: W is the float32 workspace [SPLIT_K][M][N]; the last of a column group's SPLIT_K blocks
// to arrive (tickets[blockIdx.z][blockIdx.x]) sums it into C
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
tiledsl_gemv_gemm_f32f32f32_nt_v444_beta_1x128x8_sk6f_6a202f3f(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ W, float* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc, float alpha, float beta, unsigned int* __restrict__ tickets) {
  // split-K: blockIdx.y owns K range [k_begin, k_end); partial sums go to its workspace slice
  const int k_per_split = (int)((K + SPLIT_K * (long long)BK - 1) / (SPLIT_K * BK) * BK);
  const int k_begin = (int)min((long long)K, (long long)blockIdx.y * k_per_split);
  const int k_end = (int)min((long long)K, (long long)k_begin + k_per_split);
  float* const P = W + (long long)blockIdx.y * M * N;  // this slice's partial sums
  const int row0 = blockIdx.z * BM;                  // first row of C of this block
  static_assert(VA == 1 || VA == VB, "A is read VB-wide along K, or one element at a time");
  // ---- warp -> RN columns of C; its lanes read VB-wide vectors along K (32*VB elements per step) of
  // the RN columns of B, then row by row a vector of A (L1 hits after the first warp), each used for the
  // RN columns: the thread holds one row's piece of A at a time ----
  const int lane = threadIdx.x % 32;
  const int gn0 = (blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * RN;
  float acc[BM][RN] = {};
  if (gn0 < N) {
    // K slices start on multiples of BK and K is a multiple of VB (alignment): no partial vector
    #pragma unroll UNROLL
    for (int k = k_begin + lane * VB; k < k_end; k += 32 * VB) {
      float b[RN][VB];  // the RN columns' VB elements at k
      #pragma unroll
      for (int c = 0; c < RN; ++c) {
        const int gn = gn0 + c < N ? gn0 + c : N - 1;  // columns past N: any valid one, never stored
        const float4 bc_v = __ldcs(reinterpret_cast<const float4*>(B + (long long)gn * ldb + k));
        const float bc[4] = {bc_v.x, bc_v.y, bc_v.z, bc_v.w};
        #pragma unroll
        for (int j = 0; j < VB; ++j) b[c][j] = bc[j];
      }
      #pragma unroll
      for (int m = 0; m < BM; ++m) {
        const int gm = row0 + m < M ? row0 + m : M - 1;  // rows past M: any valid row, never stored
        const float4 a_v = *reinterpret_cast<const float4*>(A + (long long)gm * lda + k);
        const float a[4] = {a_v.x, a_v.y, a_v.z, a_v.w};
        #pragma unroll
        for (int c = 0; c < RN; ++c)
          #pragma unroll
          for (int j = 0; j < VB; ++j) acc[m][c] += a[j] * b[c][j];
      }
    }
  }
  // ---- epilogue: the warp's 32 partial dot products of each (row, column), summed by shuffles; lane 0 stores P = sum (this slice's partial sums) ----
  #pragma unroll
  for (int m = 0; m < BM; ++m) {
    #pragma unroll
    for (int c = 0; c < RN; ++c) {
      float v = acc[m][c];
      #pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      const int gm = row0 + m, gn = gn0 + c;
      if (lane == 0 && gm < M && gn < N) {
        *(P + (long long)gm * N + gn) = v;
      }
    }
  }
  // ---- split-K, fused: take this column group's ticket; the last of its SPLIT_K blocks finishes C ----
  __shared__ bool last_block;
  __threadfence();                     // this block's partial sums are visible device-wide before its ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned int* const ticket = tickets + (long long)blockIdx.z * gridDim.x + blockIdx.x;
    last_block = atomicAdd(ticket, 1u) == SPLIT_K - 1;
    if (last_block) *ticket = 0u;      // every slice has arrived: zero again for the next launch
  }
  __syncthreads();
  if (!last_block) return;
  __threadfence();                     // the other slices' partial sums are read after their tickets
  // the warp's BM x RN elements over its lanes: each the sum of every slice's partial sums, in slice order
  // (the same order whichever block arrives last: deterministic); read through L2
  for (int e = lane; e < BM * RN; e += 32) {
    const int gm = row0 + e / RN, gn = gn0 + e % RN;
    if (gm >= M || gn >= N) continue;
    float sum = 0.f;
    #pragma unroll 8
    for (int z = 0; z < SPLIT_K; ++z) sum += __ldcg(W + ((long long)z * M + gm) * N + gn);
    *(C + (long long)gm * ldc + gn) = alpha * sum + beta * *(C + (long long)gm * ldc + gn);
  }
}
