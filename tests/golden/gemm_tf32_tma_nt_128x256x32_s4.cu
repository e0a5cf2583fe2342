// tiledsl GEMM on Hopper tensor cores: C[M,N] = alpha * A[M,K] @ B[K,N]
// float32 inputs read as tf32, wgmma.mma_async m64n256k8 with float32 accumulation; A row-major, B col-major, C row-major
// schedule: {"bk": 32, "bm": 128, "bn": 256, "double_buffer": true, "kernel": "tiled", "min_blocks": 1, "mma": "wgmma", "rm": 8, "rn": 8, "smem_pad": 0, "split_k": 1, "stages": 4, "swizzle": 8, "unroll": 8, "vec": 4, "warp_specialize": true, "wm": 64, "wn": 256}

// a CUtensorMap as the driver encodes it (cuTensorMapEncodeTiled): 128 opaque bytes, passed by value
struct alignas(64) tdsl_tensor_map { unsigned long long opaque[16]; };
// ---- TMA tensor copies global -> shared, completing on mbarriers (PTX ISA: cp.async.bulk.tensor, mbarrier) ----
__device__ __forceinline__ unsigned tdsl_smem_addr(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
// copy the box of `map` at element coordinates (c0 along the contiguous dimension, c1) to shared address
// `dst`; the copy adds its bytes to mbarrier `bar`'s transaction count when it lands (zeros outside the matrix)
__device__ __forceinline__ void tdsl_tma_load_2d(unsigned dst, const tdsl_tensor_map& map, int c0, int c1,
                                                 unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tdsl_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void tdsl_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// arrive on `bar` and expect `bytes` more bytes of copies before its phase completes
__device__ __forceinline__ void tdsl_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tdsl_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred P;\nmbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\nselp.u32 %0, 1, 0, P;\n}\n"
                 : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  }
}
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
// D[64x256] += A[64x8] * B[8x256] on the tensor cores, both operands read from shared memory
__device__ __forceinline__ void tdsl_wgmma(float (&d)[128], unsigned long long desc_a, unsigned long long desc_b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n}\n"
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
      "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
      "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
      "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
      "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
      "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
      "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
    : "l"(desc_a), "l"(desc_b), "r"(1));  // scale-d = 1: D += A·B
}

// ---- schedule (tiledsl.GemmSchedule) ----
constexpr int BM = 128;             // bm: block tile rows of C (64 per warpgroup)
constexpr int BN = 256;             // bn: block tile columns of C
constexpr int BK = 32;              // bk: K depth of one stage (32 elements = one 128-byte swizzled row)
constexpr int WM = 64;              // wm: warpgroup tile rows (one wgmma is 64 rows)
constexpr int WN = 256;             // wn: warpgroup tile columns (= bn)
constexpr int STAGES = 4;           // stages: K tiles in shared memory
constexpr int SMEM_PAD = 0;         // smem_pad: 0, the swizzle replaces padding
constexpr int MIN_BLOCKS = 1;       // min_blocks: resident blocks per SM the registers must allow
constexpr int SWIZZLE = 8;          // swizzle: block-rows per rasterization group
constexpr int SPLIT_K = 1;          // split_k
constexpr int MMA = 2;              // mma='wgmma': Hopper warpgroup MMA
constexpr int KERNEL = 0;           // kernel='tiled'
constexpr int WARP_SPECIALIZE = 1;  // warp_specialize: a producer warpgroup issues TMA copies
// derived
constexpr int CONSUMERS = BM / 64;            // warpgroups running wgmma, 64 rows each
constexpr int THREADS = 128 * (CONSUMERS + 1);  // + one producer warpgroup (one thread issues the copies)
constexpr int ACC = BN / 2;                    // float32 accumulators per thread
constexpr int ROW_BYTES = BK * 4;              // one tile row: 128 bytes
constexpr int STAGE_A_BYTES = BM * ROW_BYTES, STAGE_B_BYTES = BN * ROW_BYTES;
constexpr unsigned STAGE_BYTES = STAGE_A_BYTES + STAGE_B_BYTES;  // one stage's copies (its full barrier)
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
static_assert(SMEM_PAD == 0, "rule wgmma_no_padding");
static_assert(MMA == 2, "rule warp_specialize_needs_wgmma");
static_assert(WARP_SPECIALIZE == 0 || BM == 128, "rule warp_specialize_rows");
static_assert(WARP_SPECIALIZE == 0 || (BN >= 96 && MIN_BLOCKS == 1), "rule warp_specialize_registers");
static_assert(BM % WM == 0 && BN % WN == 0, "rule warp_tile_divides_block");
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
static_assert(SMEM_PAD >= 0 && SMEM_PAD <= 64 && SMEM_PAD % 4 == 0, "rule smem_pad_keeps_16_bytes");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(SPLIT_K >= 1 && SPLIT_K <= 64, "rule split_k_range");
static_assert(MIN_BLOCKS >= 1 && MIN_BLOCKS <= 32, "rule min_blocks_range");

constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;  // setmaxnreg: registers move from the producer to the consumers
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
tiledsl_gemm_tf32f32f32_nt_v444_nobeta_128x256x32_e99b5c24(const __grid_constant__ tdsl_tensor_map tmap_a, const __grid_constant__ tdsl_tensor_map tmap_b, float* __restrict__ C,
    int M, int N, int K, long long ldc, float alpha) {
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
  // full[st]: the copies of the tile in stage st have landed; empty[st]: the consumers are done with it
  const unsigned full = Bs + STAGES * STAGE_B_BYTES, empty = full + 8 * STAGES;
  if (tid == 0) {
    for (int st = 0; st < STAGES; ++st) {
      tdsl_mbar_init(full + 8 * st, 1);                // the producer's arrival + STAGE_BYTES of copies
      tdsl_mbar_init(empty + 8 * st, 128 * CONSUMERS);  // one arrival per consumer thread
    }
    tdsl_fence_proxy_async();  // the initialised barriers are visible to the copy engine (async proxy)
  }
  __syncthreads();

  const int k_begin = 0, k_end = K;      // one block covers all of K
  const int k_tiles = max(0, (k_end - k_begin + BK - 1) / BK);

  if (wg == 0) {
    // ---- producer: tile kt goes to stage kt % STAGES once the consumers released that stage ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(PRODUCER_REGS));
    if (tid == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int st = kt % STAGES, k0 = k_begin + kt * BK;
        if (kt >= STAGES) tdsl_mbar_wait(empty + 8 * st, (kt / STAGES - 1) & 1);  // tile kt-STAGES done
        tdsl_mbar_arrive_expect_tx(full + 8 * st, STAGE_BYTES);
        tdsl_tma_load_2d(As + st * STAGE_A_BYTES, tmap_a, k0, block_m, full + 8 * st);  // A: 128 rows x 32 K elements
        tdsl_tma_load_2d(Bs + st * STAGE_B_BYTES, tmap_b, k0, block_n, full + 8 * st);  // B: 256 rows x 32 K elements
      }
    }
  }
  else {
    // ---- consumers: wait for tile kt, multiply it, release the stage of tile kt-1 ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(CONSUMER_REGS));
    float acc[ACC];                       // this thread's part of its warpgroup's 64 x BN tile
    #pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] = 0.f;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int cur = kt % STAGES;
      tdsl_mbar_wait(full + 8 * cur, (kt / STAGES) & 1);  // the tile's copies have landed
      const unsigned a_tile = As + cur * STAGE_A_BYTES + (wg - 1) * 8192;  // this warpgroup's 64 rows
      const unsigned b_tile = Bs + cur * STAGE_B_BYTES;
      tdsl_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < BK / 8; ++kk)  // k8 steps: 32 bytes into A, 32 into B
        tdsl_wgmma(acc, tdsl_wgmma_desc<16, 1024>(a_tile + kk * 32), tdsl_wgmma_desc<16, 1024>(b_tile + kk * 32));
      tdsl_wgmma_commit();
      tdsl_wgmma_wait<1>();                // tile kt-1's products are complete ...
      if (kt > 0) tdsl_mbar_arrive(empty + 8 * ((kt - 1) % STAGES));  // ... so its stage is free
    }
    tdsl_wgmma_wait<0>();

    // ---- epilogue: C = alpha * acc (C is never read); accumulators 4j..4j+3 hold rows frag_row and frag_row+8 of warp rows 16*warp_in_wg, columns 8j + 2*frag_col + {0, 1} ----
    const int row0 = block_m + (wg - 1) * 64 + warp_in_wg * 16 + frag_row;
    #pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gm = row0 + h * 8;
      if (gm >= M) continue;
      float* const c_row = C + (long long)gm * ldc;
      #pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int gn = block_n + j * 8 + 2 * frag_col;
        if (gn >= N) continue;   // N is even (C alignment): the pair is wholly in or out
        float2* const dst = reinterpret_cast<float2*>(c_row + gn);
        float2 out;
        out.x = alpha * acc[4 * j + 2 * h + 0];
        out.y = alpha * acc[4 * j + 2 * h + 1];
        *dst = out;
      }
    }
  }
}
