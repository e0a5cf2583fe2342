// tiledsl GEMM on tensor cores: C[M,N] = alpha * A[M,K] @ B[K,N]
// float16 inputs, mma.sync m16n8k16 with float32 accumulation; A row-major, B row-major, C row-major
// schedule: {"bk": 32, "bm": 128, "bn": 128, "double_buffer": true, "kernel": "tiled", "min_blocks": 2, "mma": "mma_sync", "rm": 8, "rn": 8, "smem_pad": 8, "split_k": 1, "stages": 4, "swizzle": 8, "unroll": 8, "vec": 4, "warp_specialize": false, "wm": 64, "wn": 64}
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
// ---- asynchronous copies global -> shared (PTX ISA: cp.async) ----
__device__ __forceinline__ unsigned tdsl_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// copy BYTES (4, 8 or 16) bytes to shared address `smem` without staging in registers; out of range: zeros
template <int BYTES>
__device__ __forceinline__ void tdsl_cp_async(unsigned smem, const void* gmem, bool in_range) {
  const int src_bytes = in_range ? BYTES : 0;
  if constexpr (BYTES == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(smem), "l"(gmem), "r"(src_bytes));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" :: "r"(smem), "l"(gmem), "n"(BYTES), "r"(src_bytes));
  }
}
template <int BYTES>
__device__ __forceinline__ void tdsl_cp_async(void* smem, const void* gmem, bool in_range) {
  tdsl_cp_async<BYTES>(tdsl_smem_addr(smem), gmem, in_range);
}
__device__ __forceinline__ void tdsl_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int PENDING>
__device__ __forceinline__ void tdsl_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING)); }
// ---- tensor-core helpers (PTX ISA: ldmatrix, mma.sync) ----
// four 8x8 b16 matrices; lane l gives the address of row l%8 of matrix l/8
__device__ __forceinline__ void tdsl_ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tdsl_smem_addr(p)));
}
__device__ __forceinline__ void tdsl_ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(tdsl_smem_addr(p)));
}
// D = A·B + D on one m16n8k16 fragment: A f16 row-major 16x16, B f16 column-major 16x8, float32 accumulators
__device__ __forceinline__ void tdsl_mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- schedule (tiledsl.GemmSchedule) ----
constexpr int BM = 128;        // bm: block tile rows of C
constexpr int BN = 128;        // bn: block tile columns of C
constexpr int BK = 32;         // bk: K depth of one shared-memory stage
constexpr int WM = 64;         // wm: warp tile rows
constexpr int WN = 64;         // wn: warp tile columns
constexpr int STAGES = 4;      // stages: K tiles in flight (cp.async)
constexpr int SMEM_PAD = 8;    // smem_pad: elements of padding per shared row
constexpr int SWIZZLE = 8;     // swizzle: block-rows per rasterization group
constexpr int SPLIT_K = 1;     // split_k
constexpr int MIN_BLOCKS = 2;  // min_blocks: resident blocks per SM the registers must allow
constexpr int MMA = 1;         // mma='mma_sync': tensor cores
constexpr int KERNEL = 0;      // kernel='tiled'
// derived
constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int FRAG_M = WM / 16;               // m16 fragments per warp tile
constexpr int FRAG_N = WN / 8;                // n8 fragments per warp tile
constexpr int VA = 8, VB = 8;  // elements per cp.async of A and B; C is stored 2 wide (op alignment 8/8/8)
constexpr int LDS_A = BK + SMEM_PAD;         // shared row pitch of A (row-major tile)
constexpr int LDS_B = BN + SMEM_PAD;         // shared row pitch of B (row-major tile)
constexpr int STAGE_A = 5120, STAGE_B = 4352;  // elements of one stage
constexpr int COPIES_A = BM * BK / (THREADS * VA);  // copies per thread per stage
constexpr int COPIES_B = BK * BN / (THREADS * VB);
static_assert(COPIES_A * THREADS * VA == BM * BK, "A tile splits evenly");
static_assert(COPIES_B * THREADS * VB == BK * BN, "B tile splits evenly");
static_assert(FRAG_N % 2 == 0, "B fragments are loaded two n8 tiles at a time");
static_assert(BM >= 1 && BN >= 1 && BK >= 1, "rule positive_sizes");
static_assert(BM <= 1024 && BN <= 1024 && BK <= 1024, "rule tile_sizes_bounded");
static_assert(WM >= 1 && WN >= 1 && WM <= 4096 && WN <= 4096, "rule warp_tile_positive");
static_assert(MMA == 0 || MMA == 1 || MMA == 2, "rule mma_kind");
static_assert(KERNEL == 0 || KERNEL == 1, "rule kernel_kind");
static_assert(STAGES >= 1 && STAGES <= 8, "rule stages_range");
static_assert(STAGES >= 2, "rule mma_stages_at_least_2");
static_assert(WM % 16 == 0 && WN % 16 == 0, "rule mma_warp_tile_shape");
static_assert(BK % 16 == 0, "rule mma_bk_multiple_of_16");
static_assert(WM * WN <= 4096, "rule mma_accumulators_fit_registers");
static_assert((BM * BK) % (THREADS * 8) == 0 && (BK * BN) % (THREADS * 8) == 0, "rule mma_tile_copies_even");
static_assert(SMEM_PAD % 8 == 0, "rule mma_pad_16_bytes");
static_assert(BM % WM == 0 && BN % WN == 0, "rule warp_tile_divides_block");
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
static_assert(SMEM_PAD >= 0 && SMEM_PAD <= 64 && SMEM_PAD % 4 == 0, "rule smem_pad_keeps_16_bytes");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 64, "rule split_k_range");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "rule min_blocks_range");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
tiledsl_gemm_f16f32f16_nn_v888_nobeta_128x128x32_b5a197b3(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, unsigned short* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc, float alpha) {
  // ---- block -> C tile (grouped rasterization: SWIZZLE block-rows share B tiles in L2) ----
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int group = SWIZZLE * tiles_n;
  const int first_m = (blockIdx.x / group) * SWIZZLE;
  const int group_rows = min(tiles_m - first_m, SWIZZLE);
  const int tile_m = first_m + (blockIdx.x % group) % group_rows;
  const int tile_n = (blockIdx.x % group) / group_rows;
  const int block_m = tile_m * BM, block_n = tile_n * BN;
  // ---- warp -> warp tile; lane -> fragment rows/columns (PTX mma m16n8k16 fragment layout) ----
  const int tid = threadIdx.x, warp_id = tid / 32, lane = tid % 32;
  const int warp_m = (warp_id / WARPS_N) * WM, warp_n = (warp_id % WARPS_N) * WN;
  const int frag_row = lane / 4, frag_col = lane % 4;   // accumulator row within 8, column pair

  // ---- shared memory: STAGES x (A tile [BM][LDS_A], B tile [BK][LDS_B]) ----
  extern __shared__ float4 smem_raw[];
  unsigned short* const As = reinterpret_cast<unsigned short*>(smem_raw);
  unsigned short* const Bs = As + STAGES * STAGE_A;

  const int k_begin = 0, k_end = K;      // one block covers all of K
  const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);

  // global -> shared: one K tile of A and B into stage `st`, VA/VB elements per cp.async, zero-filled
  // outside the matrix (a copy is wholly in or out: the contiguous extent is a multiple of its width)
  auto load_stage = [&](int st, int k0) {
    unsigned short* const a_dst = As + st * STAGE_A;
    #pragma unroll
    for (int i = 0; i < COPIES_A; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / (BK / VA);              // row of the tile (strided dim)
      const int c = (idx % (BK / VA)) * VA;  // first element along the contiguous dim
      const bool in_range = block_m + r < M && k0 + c < k_end;
      tdsl_cp_async<16>(a_dst + r * LDS_A + c, in_range ? (A + (long long)(block_m + r) * lda + (k0 + c)) : A, in_range);
    }
    unsigned short* const b_dst = Bs + st * STAGE_B;
    #pragma unroll
    for (int i = 0; i < COPIES_B; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / (BN / VB);              // row of the tile (strided dim)
      const int c = (idx % (BN / VB)) * VB;  // first element along the contiguous dim
      const bool in_range = k0 + r < k_end && block_n + c < N;
      tdsl_cp_async<16>(b_dst + r * LDS_B + c, in_range ? (B + (long long)(k0 + r) * ldb + (block_n + c)) : B, in_range);
    }
  };

  float acc[FRAG_M][FRAG_N][4];          // the warp tile's accumulators, four per fragment
  #pragma unroll
  for (int i = 0; i < FRAG_M; ++i)
    #pragma unroll
    for (int j = 0; j < FRAG_N; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

  // ---- prologue: request K tiles 0 .. STAGES-2 (one commit group per tile, empty past the end) ----
  #pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < k_tiles) load_stage(st, k_begin + st * BK);
    tdsl_cp_async_commit();
  }

  // ---- main loop over K tiles ----
  for (int kt = 0; kt < k_tiles; ++kt) {
    tdsl_cp_async_wait<STAGES - 2>();   // this thread's copies of tile kt have landed
    __syncthreads();                    // ... everyone's; and stage (kt-1) % STAGES is free
    const int next = kt + STAGES - 1;
    if (next < k_tiles) load_stage(next % STAGES, k_begin + next * BK);
    tdsl_cp_async_commit();
    const int cur = kt % STAGES;
    const unsigned short* const as = As + cur * STAGE_A;
    const unsigned short* const bs = Bs + cur * STAGE_B;
    // compute: BK/16 steps; each loads the warp's fragments with ldmatrix and issues FRAG_M*FRAG_N mma
    #pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      unsigned a_frag[FRAG_M][4];   // A: row-major tile: lane l points at row l%16, column 8*(l/16)
      unsigned b_frag[FRAG_N][2];   // B: N-contiguous tile, transposed by ldmatrix; one x4 load covers two n8 fragments
      #pragma unroll
      for (int i = 0; i < FRAG_M; ++i) tdsl_ldmatrix_x4(a_frag[i], as + (warp_m + i * 16 + lane % 16) * LDS_A + kk + (lane / 16) * 8);
      #pragma unroll
      for (int j = 0; j < FRAG_N; j += 2) {
        unsigned r[4];
        tdsl_ldmatrix_x4_trans(r, bs + (kk + ((lane / 8) % 2) * 8 + lane % 8) * LDS_B + warp_n + j * 8 + (lane / 16) * 8);
        b_frag[j][0] = r[0]; b_frag[j][1] = r[1]; b_frag[j + 1][0] = r[2]; b_frag[j + 1][1] = r[3];
      }
      #pragma unroll
      for (int i = 0; i < FRAG_M; ++i)
        #pragma unroll
        for (int j = 0; j < FRAG_N; ++j) tdsl_mma_16816(acc[i][j], a_frag[i], b_frag[j][0], b_frag[j][1]);
    }
  }
  tdsl_cp_async_wait<0>();  // no copy may be left in flight when the block exits

  // ---- epilogue: C = alpha * acc (C is never read); each thread owns rows frag_row, frag_row+8 and columns 2*frag_col, 2*frag_col+1 of every fragment ----
  #pragma unroll
  for (int i = 0; i < FRAG_M; ++i) {
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gm = block_m + warp_m + i * 16 + h * 8 + frag_row;
      if (gm >= M) continue;
      unsigned short* const c_row = C + (long long)gm * ldc;
      #pragma unroll
      for (int j = 0; j < FRAG_N; ++j) {
        const int gn = block_n + warp_n + j * 8 + 2 * frag_col;
        if (gn >= N) continue;   // N is even (C alignment): the pair is wholly in or out
        ushort2* const dst = reinterpret_cast<ushort2*>(c_row + gn);
        ushort2 out;
        out.x = tdsl_f2h(alpha * acc[i][j][2 * h + 0]);
        out.y = tdsl_f2h(alpha * acc[i][j][2 * h + 1]);
        *dst = out;
      }
    }
  }
}
