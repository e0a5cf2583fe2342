// tiledsl GEMM: C[M,N] = alpha * A[M,K] @ B[K,N]
// dtype float32 in/out, float32 accumulation; A row-major, B row-major, C row-major
// schedule: {"bk": 8, "bm": 256, "bn": 128, "double_buffer": true, "fragment_prefetch": true, "kernel": "tiled", "min_blocks": 1, "mma": "fma", "rm": 16, "rn": 8, "smem_pad": 0, "split_k": 1, "stages": 2, "swizzle": 8, "unroll": 8, "vec": 4, "warp_specialize": false, "wm": 64, "wn": 64}

// ---- schedule (tiledsl.GemmSchedule) ----
constexpr int BM = 256;         // bm: block tile rows of C
constexpr int BN = 128;         // bn: block tile columns of C
constexpr int BK = 8;           // bk: K depth of one shared-memory tile
constexpr int RM = 16;          // rm: thread tile rows
constexpr int RN = 8;           // rn: thread tile columns
constexpr int WM = 64;          // wm: warp tile rows
constexpr int WN = 64;          // wn: warp tile columns
constexpr int VEC = 4;          // vec: requested elements per global load
constexpr int UNROLL = 8;       // unroll: inner-k unroll
constexpr int SMEM_PAD = 0;     // smem_pad: padding elements per shared row
constexpr int SWIZZLE = 8;      // swizzle: block-rows per rasterization group
constexpr int SPLIT_K = 1;      // split_k
constexpr int MIN_BLOCKS = 1;   // min_blocks: resident blocks per SM the registers must allow
constexpr int STAGES = 2;       // stages (double_buffer -> 2)
constexpr int MMA = 0;          // mma='fma': FP32 FMA units
constexpr int KERNEL = 0;       // kernel='tiled'
constexpr int THREADS = 256;    // (BM/RM)*(BN/RN)
constexpr int WARP_LANES = 32;  // (WM/RM)*(WN/RN)
// derived
constexpr int WARPS_N = BN / WN;              // warps along N
constexpr int LANES_N = WN / RN;              // threads of a warp along N
constexpr int LANES_M = WM / RM;              // threads of a warp along M
constexpr int CM = 4, CN = 4;               // fragment chunk widths (contiguous rows / cols)
constexpr int VA = 4, VB = 4, VC = 4;      // effective vector widths of A, B, C (op alignment 4/4/4)
constexpr int LDS_A = BM + SMEM_PAD;          // shared row pitch of A (As[k][m])
constexpr int LDS_B = BN + SMEM_PAD;          // shared row pitch of B (Bs[k][n])
constexpr int LOADS_A = BM * BK / (THREADS * VA);
constexpr int LOADS_B = BK * BN / (THREADS * VB);
static_assert(CN % VC == 0, "a C chunk splits into VC-wide stores");
static_assert(BM >= 1 && BN >= 1 && BK >= 1, "rule positive_sizes");
static_assert(RM >= 1 && RN >= 1, "rule thread_tile_positive");
static_assert(BM <= 1024 && BN <= 1024 && BK <= 1024, "rule tile_sizes_bounded");
static_assert(RM <= 64 && RN <= 64, "rule thread_tile_bounded");
static_assert(WM >= 1 && WN >= 1 && WM <= 4096 && WN <= 4096, "rule warp_tile_positive");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "rule vec_width");
static_assert(MMA == 0 || MMA == 1 || MMA == 2, "rule mma_kind");
static_assert(KERNEL == 0 || KERNEL == 1, "rule kernel_kind");
static_assert(STAGES >= 1 && STAGES <= 8, "rule stages_range");
static_assert(MMA == 0 && KERNEL == 0 && STAGES == 2 && UNROLL == BK, "rule fragment_prefetch_needs_unrolled_double_buffer");
static_assert(BM % RM == 0, "rule thread_tile_divides_block_m");
static_assert(BN % RN == 0, "rule thread_tile_divides_block_n");
static_assert(RM % 4 == 0 || RM == 1 || RM == 2, "rule fragment_width_m");
static_assert(RN % 4 == 0 || RN == 1 || RN == 2, "rule fragment_width_n");
static_assert(BM % WM == 0 && BN % WN == 0, "rule warp_tile_divides_block");
static_assert(WM % RM == 0 && WN % RN == 0, "rule thread_tile_divides_warp");
static_assert(WARP_LANES == 32, "rule warp_is_32_threads");
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
static_assert(BM % VEC == 0 && BN % VEC == 0 && BK % VEC == 0, "rule vec_divides_tile");
static_assert(UNROLL >= 1 && BK % UNROLL == 0, "rule unroll_divides_bk");
static_assert(SMEM_PAD >= 0 && SMEM_PAD <= 64 && SMEM_PAD % 4 == 0, "rule smem_pad_keeps_16_bytes");
static_assert(RM * RN <= 128, "rule accumulators_fit_registers");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 64, "rule split_k_range");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "rule min_blocks_range");

extern "C" __global__ void __launch_bounds__(THREADS, 1)  // registers capped near 248 per thread
tiledsl_gemm_f32f32f32_nn_v444_nobeta_256x128x8_e96a5baf(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc, float alpha) {
  // ---- block -> C tile (grouped rasterization: SWIZZLE block-rows share B tiles in L2) ----
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int group = SWIZZLE * tiles_n;
  const int first_m = (blockIdx.x / group) * SWIZZLE;
  const int group_rows = min(tiles_m - first_m, SWIZZLE);
  const int tile_m = first_m + (blockIdx.x % group) % group_rows;
  const int tile_n = (blockIdx.x % group) / group_rows;
  const int block_m = tile_m * BM, block_n = tile_n * BN;
  // ---- thread -> fragment: warp tile WMxWN, thread tile RMxRN in CMxCN chunks strided by the warp ----
  const int tid = threadIdx.x;
  const int warp_id = tid / 32, lane = tid % 32;
  const int frag_m = (warp_id / WARPS_N) * WM + (lane / LANES_N) * CM;  // first row of chunk 0
  const int frag_n = (warp_id % WARPS_N) * WN + (lane % LANES_N) * CN;  // first column of chunk 0
  // ---- shared memory: STAGES x (As[BK][LDS_A], Bs[BK][LDS_B]), K outer ----
  extern __shared__ float4 smem_raw[];
  float* const As = reinterpret_cast<float*>(smem_raw);
  float* const Bs = As + STAGES * BK * LDS_A;

  float acc[RM][RN];                      // the thread tile, in registers
  #pragma unroll
  for (int i = 0; i < RM; ++i)
    #pragma unroll
    for (int j = 0; j < RN; ++j) acc[i][j] = 0.f;

  // registers staging one K tile on its way from global to shared memory
  alignas(16) float a_stage[LOADS_A * VA];
  alignas(16) float b_stage[LOADS_B * VB];

  const int k_begin = 0, k_end = K;      // one block covers all of K
  const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);
  // ---- prologue: K tile 0 -> shared stage 0 ----
  // global -> registers: A tile (row-major), VA-wide loads along its contiguous dim, zero outside the matrix
  {
    const int k0 = k_begin;
    #pragma unroll
    for (int i = 0; i < LOADS_A; ++i) {
      const int r = (warp_id + (i / (BK / VA)) * (THREADS / 32)) * 32 + lane;  // a warp's lanes on 32 consecutive rows
      const int c = (i % (BK / VA)) * VA;  // its loads walk along them
      const bool in_range = block_m + r < M && k0 + c < k_end;
      float4 v = make_float4(0, 0, 0, 0);
      if (in_range) v = *reinterpret_cast<const float4*>(A + (long long)(block_m + r) * lda + (k0 + c));
      a_stage[i * VA + 0] = v.x;
      a_stage[i * VA + 1] = v.y;
      a_stage[i * VA + 2] = v.z;
      a_stage[i * VA + 3] = v.w;
    }
  }
  // global -> registers: B tile (row-major), VB-wide loads along its contiguous dim, zero outside the matrix
  {
    const int k0 = k_begin;
    #pragma unroll
    for (int i = 0; i < LOADS_B; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / (BN / VB);              // strided index
      const int c = (idx % (BN / VB)) * VB;  // contiguous index
      const bool in_range = k0 + r < k_end && block_n + c < N;
      float4 v = make_float4(0, 0, 0, 0);
      if (in_range) v = *reinterpret_cast<const float4*>(B + (long long)(k0 + r) * ldb + (block_n + c));
      b_stage[i * VB + 0] = v.x;
      b_stage[i * VB + 1] = v.y;
      b_stage[i * VB + 2] = v.z;
      b_stage[i * VB + 3] = v.w;
    }
  }
  // registers -> shared: A tile, transposed to K-outer
  {
    float* const dst = As;
    #pragma unroll
    for (int i = 0; i < LOADS_A; ++i) {
      const int r = (warp_id + (i / (BK / VA)) * (THREADS / 32)) * 32 + lane;
      const int c = (i % (BK / VA)) * VA;
      #pragma unroll
      for (int e = 0; e < VA; ++e) dst[(c + e) * LDS_A + r] = a_stage[i * VA + e];
    }
  }
  // registers -> shared: B tile, K-outer as loaded
  {
    float* const dst = Bs;
    #pragma unroll
    for (int i = 0; i < LOADS_B; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / (BN / VB);
      const int c = (idx % (BN / VB)) * VB;
      *reinterpret_cast<float4*>(&dst[r * LDS_B + c]) = *reinterpret_cast<const float4*>(&b_stage[i * 4]);
    }
  }
  __syncthreads();

  // ---- fragments: two register sets, k step kk uses set kk & 1 while set (kk + 1) & 1 is loaded ----
  alignas(16) float a_frag[2][RM];
  alignas(16) float b_frag[2][RN];
  {
    const float* const as = As;
    const float* const bs = Bs;
    #pragma unroll
    for (int s = 0; s < RM / CM; ++s) {
      *reinterpret_cast<float4*>(&a_frag[0][s * CM]) = *reinterpret_cast<const float4*>(&as[frag_m + s * LANES_M * CM]);
    }
    #pragma unroll
    for (int s = 0; s < RN / CN; ++s) {
      *reinterpret_cast<float4*>(&b_frag[0][s * CN]) = *reinterpret_cast<const float4*>(&bs[frag_n + s * LANES_N * CN]);
    }
  }

  // ---- main loop over K tiles ----
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int cur = kt & 1;
    const bool has_next = kt + 1 < k_tiles;
    // prefetch K tile kt+1 into registers while tile kt is multiplied
    if (has_next) {
      // global -> registers: A tile (row-major), VA-wide loads along its contiguous dim, zero outside the matrix
      {
        const int k0 = k_begin + (kt + 1) * BK;
        #pragma unroll
        for (int i = 0; i < LOADS_A; ++i) {
          const int r = (warp_id + (i / (BK / VA)) * (THREADS / 32)) * 32 + lane;  // a warp's lanes on 32 consecutive rows
          const int c = (i % (BK / VA)) * VA;  // its loads walk along them
          const bool in_range = block_m + r < M && k0 + c < k_end;
          float4 v = make_float4(0, 0, 0, 0);
          if (in_range) v = *reinterpret_cast<const float4*>(A + (long long)(block_m + r) * lda + (k0 + c));
          a_stage[i * VA + 0] = v.x;
          a_stage[i * VA + 1] = v.y;
          a_stage[i * VA + 2] = v.z;
          a_stage[i * VA + 3] = v.w;
        }
      }
      // global -> registers: B tile (row-major), VB-wide loads along its contiguous dim, zero outside the matrix
      {
        const int k0 = k_begin + (kt + 1) * BK;
        #pragma unroll
        for (int i = 0; i < LOADS_B; ++i) {
          const int idx = tid + i * THREADS;
          const int r = idx / (BN / VB);              // strided index
          const int c = (idx % (BN / VB)) * VB;  // contiguous index
          const bool in_range = k0 + r < k_end && block_n + c < N;
          float4 v = make_float4(0, 0, 0, 0);
          if (in_range) v = *reinterpret_cast<const float4*>(B + (long long)(k0 + r) * ldb + (block_n + c));
          b_stage[i * VB + 0] = v.x;
          b_stage[i * VB + 1] = v.y;
          b_stage[i * VB + 2] = v.z;
          b_stage[i * VB + 3] = v.w;
        }
      }
    }
    #pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      if (kk == BK - 1) {
        // last k step: publish the prefetched tile into the other stage; after this barrier
        // every read of that stage (tile kt-1) is done and tile kt+1 is visible
        if (has_next) {
          // registers -> shared: A tile, transposed to K-outer
          {
            float* const dst = As + (cur ^ 1) * BK * LDS_A;
            #pragma unroll
            for (int i = 0; i < LOADS_A; ++i) {
              const int r = (warp_id + (i / (BK / VA)) * (THREADS / 32)) * 32 + lane;
              const int c = (i % (BK / VA)) * VA;
              #pragma unroll
              for (int e = 0; e < VA; ++e) dst[(c + e) * LDS_A + r] = a_stage[i * VA + e];
            }
          }
          // registers -> shared: B tile, K-outer as loaded
          {
            float* const dst = Bs + (cur ^ 1) * BK * LDS_B;
            #pragma unroll
            for (int i = 0; i < LOADS_B; ++i) {
              const int idx = tid + i * THREADS;
              const int r = idx / (BN / VB);
              const int c = (idx % (BN / VB)) * VB;
              *reinterpret_cast<float4*>(&dst[r * LDS_B + c]) = *reinterpret_cast<const float4*>(&b_stage[i * 4]);
            }
          }
        }
        __syncthreads();
      }
      // fragments of the next k step: kk+1 of this tile, or k step 0 of the next tile
      {
        const float* const as = As + (kk == BK - 1 ? cur ^ 1 : cur) * BK * LDS_A + ((kk + 1) % BK) * LDS_A;
        const float* const bs = Bs + (kk == BK - 1 ? cur ^ 1 : cur) * BK * LDS_B + ((kk + 1) % BK) * LDS_B;
        #pragma unroll
        for (int s = 0; s < RM / CM; ++s) {
          *reinterpret_cast<float4*>(&a_frag[(kk + 1) & 1][s * CM]) = *reinterpret_cast<const float4*>(&as[frag_m + s * LANES_M * CM]);
        }
        #pragma unroll
        for (int s = 0; s < RN / CN; ++s) {
          *reinterpret_cast<float4*>(&b_frag[(kk + 1) & 1][s * CN]) = *reinterpret_cast<const float4*>(&bs[frag_n + s * LANES_N * CN]);
        }
      }
      #pragma unroll
      for (int i = 0; i < RM; ++i) {
        #pragma unroll
        for (int j = 0; j < RN; ++j) {
          const int jj = (i & 1) ? RN - 1 - j : j;  // serpentine
          acc[i][jj] = fmaf(a_frag[kk & 1][i], b_frag[kk & 1][jj], acc[i][jj]);
        }
      }
    }
  }

  // ---- epilogue: C = alpha * acc (C is never read), VC-wide stores ----
  #pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int gm = block_m + frag_m + (i / CM) * (LANES_M * CM) + i % CM;
    if (gm >= M) continue;
    float* const c_row = C + (long long)gm * ldc;
    #pragma unroll
    for (int s = 0; s < RN / CN; ++s) {
      const int gn = block_n + frag_n + s * (LANES_N * CN);
      // a VC-wide piece is wholly in or out of range: N is a multiple of VC (op alignment)
      #pragma unroll
      for (int p = 0; p < CN; p += VC) {
        if (gn + p >= N) break;
        float4* const dst = reinterpret_cast<float4*>(c_row + gn + p);
        float4 out;
        out.x = alpha * acc[i][s * CN + p + 0];
        out.y = alpha * acc[i][s * CN + p + 1];
        out.z = alpha * acc[i][s * CN + p + 2];
        out.w = alpha * acc[i][s * CN + p + 3];
        *dst = out;
      }
    }
  }
}
