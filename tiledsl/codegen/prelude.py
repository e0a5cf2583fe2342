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
