// tiledsl transpose: Y[b][j][i] = X[b][i][j]; X is B x R x C (any strides), Y is C x R
// dtype float16, moved as raw 16-bit words; variant naive_read
// schedule: {'variant': 'naive_read', 'tile': 32, 'rows_per_thread': 4, 'vec': 1, 'smem_pad': 0, 'swizzle': 8}

// ---- schedule (tiledsl.TransposeSchedule) ----
constexpr int TILE = 32;                           // tile: side of the square tile, elements
constexpr int ROWS_PER_THREAD = 4;                 // rows_per_thread: tile rows each thread moves
constexpr int VEC = 1;                             // vec: elements per thread chunk
constexpr int SMEM_PAD = 0;                        // smem_pad: padding elements per shared-memory row
constexpr int SWIZZLE = 8;                         // swizzle: tile-rows per rasterization group
constexpr int SHARED = 0;                          // variant == "shared" (naive_read)
constexpr int THREADS_X = TILE / VEC;              // = 32 threads along a tile row (blockDim.x)
constexpr int THREADS_Y = TILE / ROWS_PER_THREAD;  // = 8 thread rows (blockDim.y); row i of a thread is ty + i*THREADS_Y
constexpr int THREADS = THREADS_X * THREADS_Y;     // = 256 threads per block
static_assert(TILE == 32 || TILE == 64, "rule tile_side");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "rule vec_width");
static_assert(SMEM_PAD == 0 || SMEM_PAD == 1, "rule smem_pad_0_or_1");
static_assert(TILE % VEC == 0, "rule vec_divides_tile");
static_assert(ROWS_PER_THREAD >= 1 && TILE % ROWS_PER_THREAD == 0, "rule rows_per_thread_divides_tile");
static_assert(SHARED == 1 || VEC == 1, "rule naive_is_scalar");
static_assert(SHARED == 1 || SMEM_PAD == 0, "rule naive_has_no_padding");
static_assert(SWIZZLE >= 1 && SWIZZLE <= 65535, "rule swizzle_range");
static_assert(THREADS % 32 == 0, "rule threads_multiple_of_32");
static_assert(THREADS <= 1024, "rule threads_at_most_1024");
typedef unsigned short word;  // one float16 element as raw bits

// min 1 block per SM: registers are capped only by the thread count (ptxas otherwise may trade
// registers for occupancy and spill)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
tiledsl_transpose_f16_naive_read_t32_v11_129e9b4f(const word* __restrict__ x, word* __restrict__ y, int rows, int cols, int batch,
    long long x_batch, long long x_row, long long x_col,
    long long y_batch, long long y_row, long long y_col) {
  // ---- block -> tile: blockIdx.x walks the tiles of one matrix in groups of SWIZZLE tile-rows
  //      (down a group's tile-rows first, then along its tile-columns) ----
  const int tiles_r = (rows + TILE - 1) / TILE, tiles_c = (cols + TILE - 1) / TILE;
  const int swizzle = min(SWIZZLE, tiles_r);  // so group <= tiles_r * tiles_c = gridDim.x: no int overflow
  const int group = swizzle * tiles_c;  // blocks per group of `swizzle` tile-rows
  const int first_r = (blockIdx.x / group) * swizzle;
  const int group_rows = min(tiles_r - first_r, swizzle);
  const int r0 = (first_r + (blockIdx.x % group) % group_rows) * TILE;  // first row of X = first column of Y
  const int c0 = ((blockIdx.x % group) / group_rows) * TILE;  // first column of X = first row of Y
  const int tx = threadIdx.x, ty = threadIdx.y;
  // blockIdx.y strides over the batch (gridDim.y <= 65535)
  for (int b = blockIdx.y; b < batch; b += gridDim.y) {
    const word* const xb = x + b * x_batch;
    word* const yb = y + b * y_batch;
    // ---- naive, read-coalesced (ladder 1.1): a warp reads along a row of X, writes a column of Y ----
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
      const int r = r0 + ty + i * THREADS_Y;  // row of X
      const int c = c0 + tx;                  // column of X, consecutive across the warp
      if (r < rows && c < cols) yb[c * y_row + r * y_col] = xb[r * x_row + c * x_col];
    }
  }
}
