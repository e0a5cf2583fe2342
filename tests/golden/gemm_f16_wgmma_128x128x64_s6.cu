// tiledsl GEMM on Hopper tensor cores: C[M,N] = alpha * A[M,K] @ B[K,N]
// float16 inputs, wgmma.mma_async m64n128k16 with float32 accumulation; A row-major, B row-major, C row-major
// schedule: {"bk": 64, "bm": 128, "bn": 128, "double_buffer": true, "kernel": "tiled", "min_blocks": 2, "mma": "wgmma", "rm": 8, "rn": 8, "smem_pad": 0, "split_k": 1, "stages": 6, "swizzle": 8, "unroll": 8, "vec": 4, "warp_specialize": false, "wm": 64, "wn": 128}
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
// ---- Hopper helpers (PTX ISA: fence.proxy.async, wgmma) ----
// shared memory written through the generic proxy is read next by the async proxy (wgmma, TMA)
__device__ __forceinline__ void tdsl_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void tdsl_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void tdsl_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void tdsl_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(PENDING) : "memory");
}
// matrix descriptor of a tile in the 128-byte swizzled layout: start address >> 4 (bits 0-13), leading
// byte offset >> 4 (bits 16-29), stride byte offset >> 4 (bits 32-45), swizzle mode 1 = 128 bytes (62-63)
template <unsigned LBO, unsigned SBO>
__device__ __forceinline__ unsigned long long tdsl_wgmma_desc(unsigned smem) {
  return (unsigned long long)((smem & 0x3FFFF) >> 4) | ((unsigned long long)(LBO >> 4) << 16)
       | ((unsigned long long)(SBO >> 4) << 32) | (1ull << 62);
}
// D[64x128] += A[64x16] * B[16x128] on the tensor cores, both operands read from shared memory
__device__ __forceinline__ void tdsl_wgmma(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 1;\n}\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
    : "l"(desc_a), "l"(desc_b), "r"(1));  // scale-d = 1: D += A·B
}

// ---- schedule (tiledsl.GemmSchedule) ----
constexpr int BM = 128;             // bm: block tile rows of C (64 per warpgroup)
constexpr int BN = 128;             // bn: block tile columns of C
constexpr int BK = 64;              // bk: K depth of one stage (64 elements = one 128-byte swizzled row)
constexpr int WM = 64;              // wm: warpgroup tile rows (one wgmma is 64 rows)
constexpr int WN = 128;             // wn: warpgroup tile columns (= bn)
constexpr int STAGES = 6;           // stages: K tiles in shared memory
constexpr int SMEM_PAD = 0;         // smem_pad: 0, the swizzle replaces padding
constexpr int MIN_BLOCKS = 2;       // min_blocks: resident blocks per SM the registers must allow
constexpr int SWIZZLE = 8;          // swizzle: block-rows per rasterization group
constexpr int SPLIT_K = 1;          // split_k
constexpr int MMA = 2;              // mma='wgmma': Hopper warpgroup MMA
constexpr int KERNEL = 0;           // kernel='tiled'
constexpr int WARP_SPECIALIZE = 0;  // warp_specialize: off
// derived
constexpr int CONSUMERS = BM / 64;            // warpgroups running wgmma, 64 rows each
constexpr int THREADS = 128 * CONSUMERS;
constexpr int LOADERS = THREADS;              // every thread copies
constexpr int ACC = BN / 2;                    // float32 accumulators per thread
constexpr int ROW_BYTES = BK * 2;              // one tile row: 128 bytes
constexpr int STAGE_A_BYTES = BM * ROW_BYTES, STAGE_B_BYTES = BN * ROW_BYTES;
constexpr int COPIES_A = BM * BK / 8 / LOADERS;   // 16-byte copies per loading thread per stage
constexpr int COPIES_B = BN * BK / 8 / LOADERS;
static_assert(COPIES_A * LOADERS * 8 == BM * BK && COPIES_B * LOADERS * 8 == BN * BK, "tiles split evenly into 16-byte copies");
static_assert(STAGE_A_BYTES % 1024 == 0 && STAGE_B_BYTES % 1024 == 0, "stages start on a swizzle atom");
static_assert(BM >= 1 && BN >= 1 && BK >= 1, "rule positive_sizes");
static_assert(BM <= 1024 && BN <= 1024 && BK <= 1024, "rule tile_sizes_bounded");
static_assert(WM >= 1 && WN >= 1 && WM <= 4096 && WN <= 4096, "rule warp_tile_positive");
static_assert(MMA == 0 || MMA == 1 || MMA == 2, "rule mma_kind");
static_assert(KERNEL == 0 || KERNEL == 1, "rule kernel_kind");
static_assert(STAGES >= 1 && STAGES <= 8, "rule stages_range");
static_assert(BM % 64 == 0 && BM <= 256, "rule wgmma_block_rows");
static_assert(BN % 16 == 0 && BN <= 256, "rule wgmma_block_columns");
static_assert(BK == 64 || BK == 32, "rule wgmma_bk_64");
static_assert(STAGES >= 3, "rule wgmma_stages_at_least_3");
static_assert((BM * 8) % LOADERS == 0 && (BN * 8) % LOADERS == 0, "rule wgmma_copies_even");
static_assert(SMEM_PAD == 0, "rule wgmma_no_padding");
static_assert(WARP_SPECIALIZE == 0 || BM == 128, "rule warp_specialize_rows");
static_assert(WARP_SPECIALIZE == 0 || (BN >= 96 && MIN_BLOCKS == 1), "rule warp_specialize_registers");
static_assert(BM % WM == 0 && BN % WN == 0, "rule warp_tile_divides_block");
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
static_assert(SMEM_PAD >= 0 && SMEM_PAD <= 64 && SMEM_PAD % 4 == 0, "rule smem_pad_keeps_16_bytes");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 64, "rule split_k_range");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "rule min_blocks_range");

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
tiledsl_gemm_f16f32f16_nn_v888_nobeta_128x128x64_b757bf4a(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B, unsigned short* __restrict__ C,
    int M, int N, int K, long long lda, long long ldb, long long ldc, float alpha) {
  // ---- block -> C tile (grouped rasterization: SWIZZLE block-rows share B tiles in L2) ----
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int group = SWIZZLE * tiles_n;
  const int first_m = (blockIdx.x / group) * SWIZZLE;
  const int group_rows = min(tiles_m - first_m, SWIZZLE);
  const int tile_m = first_m + (blockIdx.x % group) % group_rows;
  const int tile_n = (blockIdx.x % group) / group_rows;
  const int block_m = tile_m * BM, block_n = tile_n * BN;
  // ---- thread -> warpgroup rows; lane -> accumulator rows/columns (wgmma m64nNk16 D layout) ----
  const int tid = threadIdx.x;
  const int wg = tid / 128, warp_in_wg = (tid % 128) / 32, lane = tid % 32;
  const int frag_row = lane / 4, frag_col = lane % 4;

  // ---- shared memory: STAGES x (A tile [BM][BK], B tile [BN][BK]), 128-byte swizzled, base aligned to 1024 bytes ----
  extern __shared__ float4 smem_raw[];
  const unsigned smem_base = (tdsl_smem_addr(smem_raw) + 1023) & ~1023u;
  const unsigned As = smem_base;                          // shared addresses (bytes)
  const unsigned Bs = smem_base + STAGES * STAGE_A_BYTES;

  const int k_begin = 0, k_end = K;      // one block covers all of K
  const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);

  // global -> shared: one K tile of A and B into stage `st`, 16-byte chunks along the contiguous dim;
  // chunk c of a 128-byte row r goes to chunk c ^ (r % 8) (the 128-byte swizzle); zero-filled outside
  // the matrix (the contiguous extent is a multiple of 8 elements)
  auto load_stage = [&](int st, int k0) {
    #pragma unroll
    for (int i = 0; i < COPIES_A; ++i) {
      const int idx = tid + i * LOADERS;
      const int r = idx / 8, c = idx % 8;   // tile row r (M), K chunk c
      const bool in_range = block_m + r < M && k0 + c * 8 < k_end;
      const unsigned short* const src = in_range ? A + (long long)(block_m + r) * lda + k0 + c * 8 : A;
      const unsigned dst = r * 128 + ((c ^ (r % 8)) * 16);
      tdsl_cp_async<16>(As + st * STAGE_A_BYTES + dst, src, in_range);
    }
    #pragma unroll
    for (int i = 0; i < COPIES_B; ++i) {
      const int idx = tid + i * LOADERS;
      const int k = idx / (BN / 8), mn = (idx % (BN / 8)) * 8;  // K row, first N element
      const bool in_range = k0 + k < k_end && block_n + mn < N;
      const unsigned short* const src = in_range ? B + (long long)(k0 + k) * ldb + block_n + mn : B;
      const unsigned dst = (mn / 64) * 8192 + k * 128 + ((((mn % 64) / 8) ^ (k % 8)) * 16);
      tdsl_cp_async<16>(Bs + st * STAGE_B_BYTES + dst, src, in_range);
    }
  };

  float acc[ACC];                         // this thread's part of the warpgroup's 64 x BN tile
  #pragma unroll
  for (int i = 0; i < ACC; ++i) acc[i] = 0.f;

  // ---- prologue: request K tiles 0 .. STAGES-3 (one commit group per tile, empty past the end) ----
  #pragma unroll
  for (int st = 0; st < STAGES - 2; ++st) {
    if (st < k_tiles) load_stage(st, k_begin + st * BK);
    tdsl_cp_async_commit();
  }

  // ---- main loop over K tiles ----
  for (int kt = 0; kt < k_tiles; ++kt) {
    tdsl_cp_async_wait<STAGES - 3>();   // this thread's copies of tile kt have landed
    tdsl_fence_proxy_async();            // ... and are visible to wgmma (async proxy)
    __syncthreads();                     // everyone's; the products of tile kt-2 are complete
    const int next = kt + STAGES - 2;    // refill the stage tile kt-2 was read from
    if (next < k_tiles) load_stage(next % STAGES, k_begin + next * BK);
    tdsl_cp_async_commit();
    const int cur = kt % STAGES;
    const unsigned a_tile = As + cur * STAGE_A_BYTES + wg * 8192;  // this warpgroup's 64 rows of A
    const unsigned b_tile = Bs + cur * STAGE_B_BYTES;
    tdsl_wgmma_fence();
    #pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)  // k16 steps: 32 bytes into A, 2048 into B
      tdsl_wgmma(acc, tdsl_wgmma_desc<16, 1024>(a_tile + kk * 32), tdsl_wgmma_desc<8192, 1024>(b_tile + kk * 2048));
    tdsl_wgmma_commit();
    tdsl_wgmma_wait<1>();                // keep one group of products in flight
  }
  tdsl_wgmma_wait<0>();
  tdsl_cp_async_wait<0>();  // no copy may be left in flight when the block exits

  // ---- epilogue: C = alpha * acc (C is never read); accumulators 4j..4j+3 hold rows frag_row and frag_row+8 of warp rows 16*warp_in_wg, columns 8j + 2*frag_col + {0, 1} ----
  const int row0 = block_m + (wg) * 64 + warp_in_wg * 16 + frag_row;
  #pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gm = row0 + h * 8;
    if (gm >= M) continue;
    unsigned short* const c_row = C + (long long)gm * ldc;
    #pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const int gn = block_n + j * 8 + 2 * frag_col;
      if (gn >= N) continue;   // N is even (C alignment): the pair is wholly in or out
      ushort2* const dst = reinterpret_cast<ushort2*>(c_row + gn);
      ushort2 out;
      out.x = tdsl_f2h(alpha * acc[4 * j + 2 * h + 0]);
      out.y = tdsl_f2h(alpha * acc[4 * j + 2 * h + 1]);
      *dst = out;
    }
  }
}
