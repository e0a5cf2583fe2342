// tiledsl transpose: Y[b][j][i] = X[b][i][j]; X is R x C (any strides), Y is C x R
// dtype float32, moved as raw 32-bit words; variant shared
// schedule: {'variant': 'shared', 'tile': 64, 'rows_per_thread': 4, 'vec': 4, 'smem_pad': 1, 'swizzle': 8}

// ---- schedule (tiledsl.TransposeSchedule) ----
constexpr int TILE = 64;                           // tile: side of the square tile, elements
constexpr int ROWS_PER_THREAD = 4;                 // rows_per_thread: tile rows each thread moves
constexpr int VEC = 4;                             // vec: elements per thread chunk
constexpr int SMEM_PAD = 1;                        // smem_pad: padding elements per shared-memory row
constexpr int SWIZZLE = 8;                         // swizzle: tile-rows per rasterization group
constexpr int SHARED = 1;                          // variant == "shared" (shared)
constexpr int THREADS_X = TILE / VEC;              // = 16 threads along a tile row (blockDim.x)
constexpr int THREADS_Y = TILE / ROWS_PER_THREAD;  // = 16 thread rows (blockDim.y); row i of a thread is ty + i*THREADS_Y
constexpr int THREADS = THREADS_X * THREADS_Y;     // = 256 threads per block
constexpr int VI = 4;                              // elements per load of X = min(VEC, op.align_in=4)
constexpr int VO = 4;                              // elements per store of Y = min(VEC, op.align_out=4)
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
typedef unsigned int word;  // one float32 element as raw bits

// min 1 block per SM: registers are capped only by the thread count (ptxas otherwise may trade
// registers for occupancy and spill)
extern "C" __global__ void __launch_bounds__(THREADS, 1)
tiledsl_transpose_f32_shared_t64_v44_369041f7(const word* __restrict__ x, word* __restrict__ y, int rows, int cols, int batch,
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
  __shared__ word tile[TILE][TILE + SMEM_PAD];
  // blockIdx.y strides over the batch (gridDim.y <= 65535)
  for (int b = blockIdx.y; b < batch; b += gridDim.y) {
    const word* const xb = x + b * x_batch;
    word* const yb = y + b * y_batch;
    // the thread's ROWS_PER_THREAD x VEC elements, in registers; those outside X stay unset and land in
    // tile cells that stage 4 never writes out
    word v[ROWS_PER_THREAD][VEC];
    // ---- stage 1: X -> registers; thread owns rows ty + i*THREADS_Y, columns tx*VEC .. tx*VEC+VEC-1 ----
    // 16-byte loads: x_col == 1, and VI divides x_row, x_batch and cols (op.align_in), so a load is wholly in or out of range
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
      const int r = r0 + ty + i * THREADS_Y;
      #pragma unroll
      for (int j = 0; j < VEC; j += VI) {
        const int c = c0 + tx * VEC + j;
        if (r < rows && c < cols) {
          const uint4 q = *reinterpret_cast<const uint4*>(xb + r * x_row + c);
          v[i][j + 0] = q.x;
          v[i][j + 1] = q.y;
          v[i][j + 2] = q.z;
          v[i][j + 3] = q.w;
        }
      }
    }
    // ---- stage 2: registers -> shared tile, in X's orientation ----
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i)
      #pragma unroll
      for (int e = 0; e < VEC; ++e) tile[ty + i * THREADS_Y][tx * VEC + e] = v[i][e];
    __syncthreads();
    // ---- stage 3: shared -> registers, transposed: row ty + i*THREADS_Y of the Y tile is that column
    //      of the X tile; consecutive rows of the tile are TILE + SMEM_PAD words apart (SMEM_PAD=1 staggers the banks) ----
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i)
      #pragma unroll
      for (int e = 0; e < VEC; ++e) v[i][e] = tile[tx * VEC + e][ty + i * THREADS_Y];
    // ---- stage 4: registers -> Y; thread owns rows c0 + ty + i*THREADS_Y, columns r0 + tx*VEC .. ----
    // 16-byte stores: y_col == 1, and VO divides y_row, y_batch and rows (op.align_out)
    #pragma unroll
    for (int i = 0; i < ROWS_PER_THREAD; ++i) {
      const int yr = c0 + ty + i * THREADS_Y;  // row of Y = column of X
      #pragma unroll
      for (int j = 0; j < VEC; j += VO) {
        const int yc = r0 + tx * VEC + j;        // column of Y = row of X
        if (yr < cols && yc < rows) {
          uint4 q;
          q.x = v[i][j + 0];
          q.y = v[i][j + 1];
          q.z = v[i][j + 2];
          q.w = v[i][j + 3];
          *reinterpret_cast<uint4*>(yb + yr * y_row + yc) = q;
        }
      }
    }
    __syncthreads();  // the next matrix of the batch reuses the tile
  }
}
