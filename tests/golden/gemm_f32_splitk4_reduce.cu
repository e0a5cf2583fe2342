// tiledsl split-K epilogue: C[M,N] = alpha * sum of 4 float32 partial products + beta * C
constexpr int SPLIT_K = 4;  // GemmSchedule.split_k
extern "C" __global__ void __launch_bounds__(256)
tiledsl_gemm_splitk_reduce_f32_beta_sk4(const float* W, float* __restrict__ C, int M, int N, long long ldc, float alpha, float beta) {
  const long long idx = blockIdx.x * 256LL + threadIdx.x;   // element of C, row-major
  const long long mn = (long long)M * N;
  if (idx >= mn) return;
  #if __CUDA_ARCH__ >= 900
  // launched as a programmatic dependent launch of the main kernel (sm_90+, tiledsl.dependent): wait until
  // that grid has completed and its partial sums are visible (a no-op after a plain launch)
  asm volatile("griddepcontrol.wait;" ::: "memory");
  #endif
  float sum = 0.f;
  #pragma unroll
  for (int z = 0; z < SPLIT_K; ++z) sum += W[z * mn + idx];   // fixed order: deterministic
  float* const c = C + (idx / N) * ldc + idx % N;
  *c = alpha * sum + beta * *c;
}
