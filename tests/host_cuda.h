// Host (CPU) stand-ins for the CUDA built-ins tiledsl's FMA kernels use, so that an emitted kernel's own source runs
// on a CPU in the tests (tests/host_cuda.py): every CUDA thread of a block is a fiber of one OS thread, the blocks run
// one after another, __syncthreads is a barrier of the block's threads and a warp's shuffles exchange values through
// a barrier of its lanes. Shared memory: a __shared__ variable becomes a function-static one (one block runs at a time), the
// dynamic shared memory a buffer filled with 0xff bytes (NaN as float32) before each block. Inline PTX (cp.async, mma,
// cvt) has no stand-in: a kernel that uses it does not compile here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <vector>

#include <ucontext.h>

struct uint3 { unsigned x = 0, y = 0, z = 0; };
using dim3 = uint3;
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct ushort2 { unsigned short x, y; };
struct ushort4 { unsigned short x, y, z, w; };
struct uint2 { unsigned x, y; };
struct uint4 { unsigned x, y, z, w; };
struct ulonglong2 { unsigned long long x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) alignas(n)

namespace host_cuda {

// Every CUDA thread of the running block is a fiber (ucontext) of this one OS thread: a fiber runs until it waits at
// a barrier or returns, then the next runnable one resumes. No two run at once, so a shuffle's or an atomic's
// exchange needs no locking, and a barrier no fiber can pass is reported, not waited on forever.
struct Fiber {
  ucontext_t ctx;
  uint3 tid;
  bool done = false, waiting = false;
};

struct Scheduler {
  ucontext_t main;
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<char[]>> stacks;
  int current = -1;
};
inline Scheduler sched;

constexpr std::size_t kStackBytes = 256 << 10;

[[noreturn]] inline void die(const char* what) { std::fprintf(stderr, "host_cuda: %s\n", what); std::exit(2); }

struct Barrier {
  explicit Barrier(int n) : expected(n) {}
  int expected, arrived = 0;
  std::vector<int> waiters;
  void arrive_and_wait() {
    if (++arrived == expected) {  // the last to arrive releases the others and runs on
      arrived = 0;
      for (int w : waiters) sched.fibers[w].waiting = false;
      waiters.clear();
      return;
    }
    const int me = sched.current;
    sched.fibers[me].waiting = true;
    waiters.push_back(me);
    swapcontext(&sched.fibers[me].ctx, &sched.main);
  }
};

struct Warp {
  explicit Warp(int lanes) : bar(lanes) {}
  Barrier bar;
  std::uint64_t slot[32] = {};
};

struct Block {
  Block(int threads, std::size_t smem_bytes) : bar(threads), smem(smem_bytes + 256, static_cast<unsigned char>(0xff)) {
    for (int w = 0; w < threads; w += 32) warps.push_back(std::make_unique<Warp>(std::min(32, threads - w)));
  }
  Barrier bar;
  std::vector<std::unique_ptr<Warp>> warps;
  std::vector<unsigned char> smem;
  void* dynamic_smem() {  // 256-byte aligned, as CUDA's
    auto p = reinterpret_cast<std::uintptr_t>(smem.data());
    return reinterpret_cast<void*>((p + 255) & ~std::uintptr_t(255));
  }
};

inline Block* this_block = nullptr;

inline Warp& this_warp(unsigned tid) { return *this_block->warps[tid / 32]; }

}  // namespace host_cuda

inline uint3 threadIdx;  // the running fiber's (set at each resume)
inline uint3 blockIdx;
inline uint3 blockDim;
inline uint3 gridDim;

inline void __syncthreads() { host_cuda::this_block->bar.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  host_cuda::this_warp(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)).bar.arrive_and_wait();
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

namespace host_cuda {
// every lane of the warp posts its value, then reads lane `src(lane)`'s: the lanes of a full-mask shuffle all call it
template <class T, class F>
T exchange(T v, F src) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  Warp& w = this_warp(tid);
  const unsigned lane = tid % 32;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  w.slot[lane] = bits;
  w.bar.arrive_and_wait();
  const unsigned from = src(lane);
  std::uint64_t got = w.slot[from < 32 ? from : lane];
  w.bar.arrive_and_wait();
  T out;
  std::memcpy(&out, &got, sizeof(T));
  return out;
}
}  // namespace host_cuda

template <class T> T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
  return host_cuda::exchange(v, [mask](unsigned lane) { return lane ^ static_cast<unsigned>(mask); });
}
template <class T> T __shfl_down_sync(unsigned, T v, unsigned delta, int = 32) {
  return host_cuda::exchange(v, [delta](unsigned lane) { return lane + delta < 32 ? lane + delta : lane; });
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned delta, int = 32) {
  return host_cuda::exchange(v, [delta](unsigned lane) { return lane >= delta ? lane - delta : lane; });
}
template <class T> T __shfl_sync(unsigned, T v, int src, int = 32) {
  return host_cuda::exchange(v, [src](unsigned) { return static_cast<unsigned>(src) % 32; });
}

template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
template <class T> T __ldca(const T* p) { return *p; }
template <class T> T __ldlu(const T* p) { return *p; }
template <class T> T __ldcv(const T* p) { return *p; }
template <class T> void __stcs(T* p, T v) { *p = v; }
template <class T> void __stcg(T* p, T v) { *p = v; }
template <class T> void __stwb(T* p, T v) { *p = v; }

template <class T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T> T atomicExch(T* p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T> T atomicCAS(T* p, T expected, T desired) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}

template <class A, class B> auto min(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <class A, class B> auto max(A a, B b) -> std::common_type_t<A, B> {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b) : static_cast<C>(a);
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
inline long long __double_as_longlong(double d) { long long i; std::memcpy(&i, &d, 8); return i; }

namespace host_cuda {

// Run `kernel` (a callable taking no arguments: the kernel with its arguments bound) over the grid, one block at a
// time, each of its threads a fiber; a block whose fibers all wait at barriers that none can pass ends the run.
inline const std::function<void()>* running_kernel = nullptr;

inline void fiber_entry() {
  (*running_kernel)();
  sched.fibers[sched.current].done = true;
}  // returns to uc_link: the scheduler

inline void launch(uint3 grid, uint3 block, std::size_t smem_bytes, const std::function<void()>& kernel) {
  gridDim = grid;
  blockDim = block;
  running_kernel = &kernel;
  const int threads = static_cast<int>(block.x * block.y * block.z);
  sched.fibers.assign(threads, Fiber{});
  while (static_cast<int>(sched.stacks.size()) < threads) sched.stacks.emplace_back(new char[kStackBytes]);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        Block b(threads, smem_bytes);
        this_block = &b;
        blockIdx = {bx, by, bz};
        for (int t = 0; t < threads; ++t) {
          Fiber& f = sched.fibers[t];
          f = Fiber{};
          f.tid = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = sched.stacks[t].get();
          f.ctx.uc_stack.ss_size = kStackBytes;
          f.ctx.uc_link = &sched.main;
          makecontext(&f.ctx, fiber_entry, 0);
        }
        for (int finished = 0; finished < threads;) {
          bool ran = false;
          finished = 0;
          for (int t = 0; t < threads; ++t) {
            Fiber& f = sched.fibers[t];
            if (!f.done && !f.waiting) {
              sched.current = t;
              threadIdx = f.tid;
              swapcontext(&sched.main, &f.ctx);
              ran = true;
            }
            finished += f.done;
          }
          if (!ran && finished < threads) die("deadlock: every live thread waits at a barrier the others never reach");
        }
      }
}

// The run's arguments and buffers: argv[1] names a manifest of whitespace-separated tokens,
//   grid gx gy gz block bx by bz smem BYTES buffers N (PATH BYTES)*N args (p INDEX | i VALUE | f HEXBITS32 | d HEXBITS64)*
// Buffers are read from their files before the launch and written back after it.
struct Manifest {
  uint3 grid, block;
  std::size_t smem = 0;
  std::vector<std::string> paths;
  std::vector<std::vector<unsigned char>> buffers;
  FILE* f = nullptr;

  explicit Manifest(const char* path) {
    f = std::fopen(path, "r");
    if (!f) die("cannot open the manifest");
    expect("grid"); grid = {unum(), unum(), unum()};
    expect("block"); block = {unum(), unum(), unum()};
    expect("smem"); smem = unum();
    expect("buffers");
    const unsigned n = unum();
    for (unsigned i = 0; i < n; ++i) {
      paths.push_back(word());
      const std::size_t bytes = unum();
      std::vector<unsigned char> data(bytes + 64);
      FILE* b = std::fopen(paths.back().c_str(), "rb");
      if (!b || std::fread(data.data(), 1, bytes, b) != bytes) die("cannot read a buffer");
      std::fclose(b);
      data.resize(bytes + 64);
      buffers.push_back(std::move(data));
    }
    expect("args");
  }
  ~Manifest() { if (f) std::fclose(f); }

  std::string word() {
    char buf[4096];
    if (std::fscanf(f, "%4095s", buf) != 1) die("manifest ends early");
    return buf;
  }
  void expect(const char* w) { if (word() != w) die("manifest out of order"); }
  unsigned long long unum() { return std::strtoull(word().c_str(), nullptr, 10); }

  template <class T> T next() {  // the next argument, as the kernel's parameter type T
    const std::string kind = word();
    if constexpr (std::is_pointer_v<T>) {
      if (kind != "p") die("a pointer parameter needs 'p INDEX'");
      const unsigned long long i = unum();
      if (i == 0) return nullptr;  // index 0: nullptr; buffers count from 1
      return reinterpret_cast<T>(buffers.at(i - 1).data());
    } else if constexpr (std::is_same_v<T, float>) {
      if (kind != "f") die("a float parameter needs 'f HEXBITS'");
      const unsigned u = static_cast<unsigned>(std::strtoull(word().c_str(), nullptr, 16));
      return __uint_as_float(u);
    } else if constexpr (std::is_same_v<T, double>) {
      if (kind != "d") die("a double parameter needs 'd HEXBITS'");
      const unsigned long long u = std::strtoull(word().c_str(), nullptr, 16);
      double d; std::memcpy(&d, &u, 8); return d;
    } else {
      if (kind != "i") die("an integer parameter needs 'i VALUE'");
      return static_cast<T>(std::strtoll(word().c_str(), nullptr, 10));
    }
  }

  void write_back() {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      FILE* b = std::fopen(paths[i].c_str(), "wb");
      const std::size_t bytes = buffers[i].size() - 64;
      if (!b || std::fwrite(buffers[i].data(), 1, bytes, b) != bytes) die("cannot write a buffer");
      std::fclose(b);
    }
  }
};

}  // namespace host_cuda
