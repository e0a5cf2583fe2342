// tiledsl GEMV-style GEMM: C[M,N] = alpha * A[M,K] @ B[K,N], few rows M
// dtype float32 in/out, float32 accumulation; A row-major, B row-major, C row-major
// schedule: {"bk": 8, "bm": 4, "bn": 128, "double_buffer": true, "kernel": "gemv", "min_blocks": 1, "mma": "fma", "rm": 8, "rn": 8, "smem_pad": 0, "split_k": 64, "stages": 2, "swizzle": 8, "unroll": 8, "vec": 4, "warp_specialize": false, "wm": 1, "wn": 1}

// ---- schedule (tiledsl.GemmSchedule, kernel='gemv') ----
constexpr int BM = 4;          // bm: rows of C per block (kept in registers)
constexpr int BN = 128;        // bn: threads per block
constexpr int BK = 8;          // bk: K slices start on multiples of it
constexpr int VEC = 4;         // vec: requested elements per load
constexpr int UNROLL = 8;      // unroll: K steps per thread in flight
constexpr int SPLIT_K = 64;    // split_k: K slices
constexpr int MMA = 0;         // mma='fma'
constexpr int KERNEL = 1;      // kernel='gemv'
constexpr int THREADS = 128;   // = bn
constexpr int MIN_BLOCKS = 1;  // min_blocks
constexpr int RM = 8;          // rm (unused)
constexpr int RN = 8;          // rn: columns per warp (column-major B)
constexpr int WM = 1;          // wm (unused)
constexpr int WN = 1;          // wn (unused)
constexpr int STAGES = 2;      // stages (unused)
constexpr int SMEM_PAD = 0;    // smem_pad (unused)
constexpr int SWIZZLE = 8;     // swizzle (unused)
constexpr int VA = 4, VB = 4, VC = 4;  // elements per load of A and B, per store of C (op alignment 4/4/4)
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
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
static_assert(SMEM_PAD >= 0 && SMEM_PAD <= 64 && SMEM_PAD % 4 == 0, "rule smem_pad_keeps_16_bytes");
static_assert(RM * RN <= 128, "rule accumulators_fit_registers");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 1024, "rule gemv_split_k_range");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "rule min_blocks_range");

// split-K: C is the float32 workspace [SPLIT_K][M][ldc]; tiledsl_gemm_splitk_reduce_f32_nobeta_sk64 sums it
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
tiledsl_gemv_gemm_f32f32f32_nn_v444_nobeta_4x128x8_sk64_2770cf5f(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc, float alpha) {
  // split-K: blockIdx.y owns K range [k_begin, k_end); partial sums go to its workspace slice
  const int k_per_split = (int)((K + SPLIT_K * (long long)BK - 1) / (SPLIT_K * BK) * BK);
  const int k_begin = (int)min((long long)K, (long long)blockIdx.y * k_per_split);
  const int k_end = (int)min((long long)K, (long long)k_begin + k_per_split);
  C += (long long)blockIdx.y * M * ldc;
  const int row0 = blockIdx.z * BM;                  // first row of C of this block
  // ---- thread -> VB adjacent columns; walk the K slice VA steps at a time: per row of A one VA-wide
  // load (the same address across the warp), per k one VB-wide load of B ----
  const int gn = (blockIdx.x * THREADS + threadIdx.x) * VB;  // N is a multiple of VB (alignment)
  float acc[BM][VB] = {};
  if (gn < N) {
    // K slices start on multiples of BK and K is a multiple of VA (alignment): whole steps
    #pragma unroll UNROLL
    for (int k0 = k_begin; k0 < k_end; k0 += VA) {
      float a[BM][VA];
      #pragma unroll
      for (int m = 0; m < BM; ++m) {
        const int gm = row0 + m < M ? row0 + m : M - 1;  // rows past M: any valid row, never stored
        const float4 am_v = *reinterpret_cast<const float4*>(A + (long long)gm * lda + k0);
        const float am[4] = {am_v.x, am_v.y, am_v.z, am_v.w};
        #pragma unroll
        for (int kk = 0; kk < VA; ++kk) a[m][kk] = am[kk];
      }
      #pragma unroll
      for (int kk = 0; kk < VA; ++kk) {
        const float4 b_v = *reinterpret_cast<const float4*>(B + (long long)(k0 + kk) * ldb + gn);
        const float b[4] = {b_v.x, b_v.y, b_v.z, b_v.w};
        #pragma unroll
        for (int m = 0; m < BM; ++m)
          #pragma unroll
          for (int j = 0; j < VB; ++j) acc[m][j] += a[m][kk] * b[j];
      }
    }
  }
  // ---- epilogue: C = alpha * acc (C is never read); VB columns per row, VC-wide stores ----
  if (gn < N) {
    #pragma unroll
    for (int m = 0; m < BM; ++m) {
      const int gm = row0 + m;
      if (gm >= M) break;
      float* const c_row = C + (long long)gm * ldc + gn;
      #pragma unroll
      for (int j = 0; j < VB; j += VC) {
        float4 out;
        out.x = alpha * acc[m][j + 0];
        out.y = alpha * acc[m][j + 1];
        out.z = alpha * acc[m][j + 2];
        out.w = alpha * acc[m][j + 3];
        *reinterpret_cast<float4*>(c_row + j) = out;
      }
    }
  }
}
