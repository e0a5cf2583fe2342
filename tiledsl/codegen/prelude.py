"""CUDA C helpers shared by emitters: 16-bit float conversions without CUDA headers.

NVRTC from PyPI ships no ``cuda_fp16.h``; these use PTX ``cvt`` (PTX ISA, "cvt") and bit shifts, so
float16/bfloat16 kernels compile with NVRTC alone.
"""

HALF_HELPERS = r"""// float16 / bfloat16 <-> float32, as raw 16-bit patterns (PTX cvt; round to nearest even)
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
"""


def helpers_for(*dtype_names: str) -> str:
    """The prelude text needed by kernels touching these dtypes ("" if none are 16-bit)."""
    return HALF_HELPERS if {"float16", "bfloat16"} & set(dtype_names) else ""


ASYNC_COPY_HELPERS = r"""// ---- asynchronous copies global -> shared (PTX ISA: cp.async) ----
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
"""
"""cp.async helpers shared by the tensor-core emitters (mma.sync and wgmma kernels)."""

