// Host (CPU) stand-ins for the CUDA built-ins tiledsl's FMA kernels use, so that an emitted kernel's own source runs
// on a CPU in the tests (tests/host_cuda.py): every CUDA thread of a block is a fiber of one OS thread, the blocks run
// one after another, __syncthreads is a barrier of the block's threads and a warp's shuffles exchange values through
// a barrier of its lanes. Shared memory (static and dynamic) is per block and filled with 0xff bytes (NaN as float32)
// before the block runs; tests/host_cuda.py rewrites each __shared__ declaration into host_cuda::shared_var. Global
// buffers end against an unmapped guard region (an access past an array's end stops the run) and sit among 0xff
// bytes that must still be 0xff after it. The prelude's
// cp.async helpers are replaced (tests/host_cuda.py) by queued copies landing at the matching wait.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

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
#define __align__(n) alignas(n)

namespace host_cuda {

[[noreturn]] inline void die(const char* what) {  // _exit: no destructor unmaps the fiber stack it may run on
  std::fprintf(stderr, "host_cuda: %s\n", what);
  std::fflush(stderr);
  _exit(2);
}

// `bytes` of memory ending (16-byte aligned) against kGuardBytes of unmapped address space: an access past the end
// faults (SIGSEGV) instead of reading a neighbour. `fill` >= 0: the bytes are set to it; `poison_around`: the rest of
// the writable pages (the rounding past the end, the page before the start) hold 0xff, and intact() says whether
// they still do; `guard_below`: one more unmapped page below the start (a fiber stack grows down into it).
constexpr std::size_t kGuardBytes = 1 << 20;

class Guarded {
 public:
  Guarded(std::size_t bytes, int fill, bool poison_around = false, bool guard_below = false) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    used_ = (bytes + 15) / 16 * 16;
    bytes_ = bytes;
    below_ = guard_below ? page : 0;
    writable_ = (used_ + page - 1) / page * page;
    mapped_ = below_ + writable_ + kGuardBytes;
    base_ = static_cast<unsigned char*>(mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) die("mmap failed");
    if (mprotect(base_ + below_ + writable_, kGuardBytes, PROT_NONE) != 0) die("mprotect failed");
    if (below_ && mprotect(base_, below_, PROT_NONE) != 0) die("mprotect failed");
    data_ = base_ + below_ + writable_ - used_;
    if (poison_around) std::memset(base_ + below_, 0xff, writable_);
    if (fill >= 0) std::memset(data_, fill, used_);
  }
  ~Guarded() { munmap(base_, mapped_); }
  Guarded(const Guarded&) = delete;
  Guarded& operator=(const Guarded&) = delete;
  unsigned char* data() { return data_; }
  bool intact() const {  // the writable bytes outside [data, data + bytes) still 0xff
    for (const unsigned char* p = base_ + below_; p < data_; ++p) if (*p != 0xff) return false;
    for (const unsigned char* p = data_ + bytes_; p < base_ + below_ + writable_; ++p) if (*p != 0xff) return false;
    return true;
  }

 private:
  unsigned char* base_ = nullptr;
  unsigned char* data_ = nullptr;
  std::size_t mapped_ = 0, writable_ = 0, below_ = 0, used_ = 0, bytes_ = 0;
};

// Every CUDA thread of the running block is a fiber (ucontext) of this one OS thread: a fiber runs until it waits at
// a barrier or returns, then the next runnable one resumes, in index order or (every other block, or always) in
// reverse. No two run at once, so a shuffle's or an atomic's exchange needs no locking, and a barrier no fiber can
// pass is reported, not waited on forever.
struct Copy {  // one queued cp.async: lands at the wait that covers its group
  void* dst;
  const void* src;
  int bytes;
  bool in_range;
};

struct Fiber {
  ucontext_t ctx;
  uint3 tid;
  bool done = false, waiting = false;
  std::vector<std::vector<Copy>> groups{1};  // committed groups, oldest first; the last one is open
};

constexpr std::size_t kStackBytes = 256 << 10;

struct Scheduler {
  ucontext_t main;
  std::vector<Fiber> fibers;
  std::vector<std::unique_ptr<Guarded>> stacks;  // a fiber's stack overflowing runs into the page below it
  int current = -1;
};
inline Scheduler sched;

struct Barrier {
  explicit Barrier(int n) : expected(n) {}
  int expected, arrived = 0;
  std::vector<int> waiters;
  void arrive_and_wait() {
    const int me = sched.current;
    if (++arrived == expected) {  // the last to arrive releases the others and yields: all resume in the run's order
      arrived = 0;
      for (int w : waiters) sched.fibers[w].waiting = false;
      waiters.clear();
      swapcontext(&sched.fibers[me].ctx, &sched.main);
      return;
    }
    sched.fibers[me].waiting = true;
    waiters.push_back(me);
    swapcontext(&sched.fibers[me].ctx, &sched.main);
  }
};

struct Warp {
  explicit Warp(int lanes) : bar(lanes) {}
  Barrier bar;
  std::uint64_t slot[32] = {};
  unsigned mma_a[32][4] = {}, mma_b[32][2] = {};  // each lane's fragments of an mma.sync
  double dmma_a[32][8] = {}, dmma_b[32][4] = {};  // and of a float64 one
};

struct Block {
  Block(int threads, std::size_t smem_bytes) : bar(threads), smem(smem_bytes, 0xff, true) {
    for (int w = 0; w < threads; w += 32) warps.push_back(std::make_unique<Warp>(std::min(32, threads - w)));
  }
  Barrier bar;
  std::vector<std::unique_ptr<Warp>> warps;
  Guarded smem;  // the dynamic shared memory
  std::map<int, std::unique_ptr<Guarded>> statics;  // each __shared__ declaration's storage, by its site
  void* dynamic_smem() { return smem.data(); }
};

inline Block* this_block = nullptr;

inline Warp& this_warp(unsigned tid) { return *this_block->warps[tid / 32]; }

// The block's storage of the __shared__ declaration at `site` (one per declaration: every thread of the block gets
// the same object), 0xff-filled when the block's first thread reaches it.
template <class T>
T& shared_var(int site) {
  auto& slot = this_block->statics[site];
  if (!slot) slot = std::make_unique<Guarded>(sizeof(T), 0xff, true);
  return *reinterpret_cast<T*>(slot->data());
}

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

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: every lane posts its fragments, then computes its own four
// accumulators from the warp's (PTX ISA's fragment layout: g = lane / 4, t = lane % 4; A register r holds row g + 8·(r % 2),
// k t + 4·(r / 2); B register r holds k t + 4·r, column g; D element i holds row g + 8·(i / 2), column 2t + i % 2). The
// inputs' low 13 bits are ignored, as TF32 has none; the accumulator and the eight products (exact) are summed exactly
// and cut toward zero to float32 once: an idealisation of the truncation measured on V100/T4/A100 tensor cores, which
// also drop each addend's low bits when aligning them (so the hardware's error may be larger, not smaller)
inline void mma_1688_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  Warp& w = this_warp(tid);
  const unsigned lane = tid % 32;
  std::memcpy(w.mma_a[lane], a, sizeof a);
  std::memcpy(w.mma_b[lane], b, sizeof b);
  w.bar.arrive_and_wait();
  const auto tf32 = [](unsigned u) { u &= 0xffffe000u; float f; std::memcpy(&f, &u, 4); return f; };
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i / 2), col = 2 * t + i % 2;
    double sum = d[i];  // the eight products of TF32 values are exact in double, and so (nearly always) is their sum
    for (unsigned kk = 0; kk < 8; ++kk) {
      const float x = tf32(w.mma_a[(row % 8) * 4 + kk % 4][row / 8 + 2 * (kk / 4)]);
      const float y = tf32(w.mma_b[col * 4 + kk % 4][kk / 4]);
      sum += static_cast<double>(x) * y;
    }
    float out = static_cast<float>(sum);  // then cut toward zero to float32, as the tensor cores' accumulation does
    if (std::isfinite(out) && std::fabs(static_cast<double>(out)) > std::fabs(sum)) out = std::nextafter(out, 0.0f);
    d[i] = out;
  }
  w.bar.arrive_and_wait();
}

// mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64: every lane posts its fragments, then computes its own four
// accumulators from the warp's (PTX ISA's fragment layout: g = lane / 4, t = lane % 4; A register r holds row
// g + 8·(r % 2), k t + 4·(r / 2); B register r holds k t + 4·r, column g; D element i holds row g + 8·(i / 2), column
// 2t + i % 2). IEEE float64, rounded to nearest: the accumulator plus the sixteen products, one fused multiply-add each
// in k order (the hardware's order within the instruction is not documented; with float32 operands every product is
// exact and only the sums round)
inline void mma_16816_f64(double (&d)[4], const double (&a)[8], const double (&b)[4]) {
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  Warp& w = this_warp(tid);
  const unsigned lane = tid % 32;
  std::memcpy(w.dmma_a[lane], a, sizeof a);
  std::memcpy(w.dmma_b[lane], b, sizeof b);
  w.bar.arrive_and_wait();
  const unsigned g = lane / 4, t = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const unsigned row = g + 8 * (i / 2), col = 2 * t + i % 2;
    double sum = d[i];
    for (unsigned kk = 0; kk < 16; ++kk)
      sum = std::fma(w.dmma_a[(row % 8) * 4 + kk % 4][row / 8 + 2 * (kk / 4)], w.dmma_b[col * 4 + kk % 4][kk / 4], sum);
    d[i] = sum;
  }
  w.bar.arrive_and_wait();
}

// cp.async, queued: the destination is poisoned when the copy is issued and written when a wait covers its group
inline void cp_async(void* dst, const void* src, int bytes, bool in_range) {
  std::memset(dst, 0xff, bytes);
  sched.fibers[sched.current].groups.back().push_back({dst, src, bytes, in_range});
}
inline void land(std::vector<Copy>& group) {
  for (const Copy& c : group) {
    if (c.in_range) std::memcpy(c.dst, c.src, c.bytes); else std::memset(c.dst, 0, c.bytes);
  }
  group.clear();
}
inline void cp_async_commit() { sched.fibers[sched.current].groups.emplace_back(); }
inline void cp_async_wait(int pending) {  // all but the newest `pending` committed groups have landed
  auto& groups = sched.fibers[sched.current].groups;
  const int committed = static_cast<int>(groups.size()) - 1;
  for (int g = 0; g < committed - pending; ++g) land(groups[g]);
  if (committed > pending) groups.erase(groups.begin(), groups.begin() + (committed - pending));
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
// time (`reverse_blocks`: the last first), each of its threads a fiber, resumed in index order or in reverse
// (`fiber_order` 'f' always forward, 'r' always reverse, 'a' alternating by the block's position in the run); a block
// whose fibers all wait at barriers that none can pass ends the run.
inline const std::function<void()>* running_kernel = nullptr;

inline void fiber_entry() {
  (*running_kernel)();
  Fiber& f = sched.fibers[sched.current];
  for (const auto& g : f.groups)
    if (!g.empty()) die("a thread ended with cp.async copies no wait covered");
  f.done = true;
}  // returns to uc_link: the scheduler

inline void launch(uint3 grid, uint3 block, std::size_t smem_bytes, const std::function<void()>& kernel,
                   char fiber_order, bool reverse_blocks) {
  gridDim = grid;
  blockDim = block;
  running_kernel = &kernel;
  const int threads = static_cast<int>(block.x * block.y * block.z);
  while (static_cast<int>(sched.stacks.size()) < threads) sched.stacks.push_back(std::make_unique<Guarded>(kStackBytes, -1, false, true));
  const long long blocks = static_cast<long long>(grid.x) * grid.y * grid.z;
  for (long long n = 0; n < blocks; ++n) {
    const long long b = reverse_blocks ? blocks - 1 - n : n;
    const bool backward = fiber_order == 'r' || (fiber_order == 'a' && n % 2 == 1);
    Block blk(threads, smem_bytes);
    this_block = &blk;
    blockIdx = {static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                static_cast<unsigned>(b / (static_cast<long long>(grid.x) * grid.y))};
    sched.fibers.assign(threads, Fiber{});
    for (int t = 0; t < threads; ++t) {
      Fiber& f = sched.fibers[t];
      f.tid = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = sched.stacks[t]->data();
      f.ctx.uc_stack.ss_size = kStackBytes;
      f.ctx.uc_link = &sched.main;
      makecontext(&f.ctx, fiber_entry, 0);
    }
    for (int finished = 0; finished < threads;) {
      bool ran = false;
      finished = 0;
      for (int i = 0; i < threads; ++i) {
        const int t = backward ? threads - 1 - i : i;
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

// The run's arguments and buffers: argv[1] names a manifest of whitespace-separated tokens (names without spaces,
// relative to the working directory),
//   grid gx gy gz block bx by bz smem BYTES order F|R|A BLOCKS buffers N (NAME BYTES)*N args (p INDEX | i VALUE |
//   f HEXBITS32 | d HEXBITS64)*
// Buffers are read from their files before the launch and written back after it, each in guarded memory.
struct Manifest {
  uint3 grid, block;
  std::size_t smem = 0;
  char fiber_order = 'a';
  bool reverse_blocks = false;
  std::vector<std::string> paths;
  std::vector<std::size_t> sizes;
  std::vector<std::unique_ptr<Guarded>> buffers;
  FILE* f = nullptr;

  explicit Manifest(const char* path) {
    f = std::fopen(path, "r");
    if (!f) die("cannot open the manifest");
    expect("grid"); grid = {unum(), unum(), unum()};
    expect("block"); block = {unum(), unum(), unum()};
    expect("smem"); smem = unum();
    expect("order"); fiber_order = word()[0]; reverse_blocks = word() == "reverse";
    expect("buffers");
    const unsigned n = unum();
    for (unsigned i = 0; i < n; ++i) {
      paths.push_back(word());
      sizes.push_back(unum());
      buffers.push_back(std::make_unique<Guarded>(sizes.back(), -1, true));
      FILE* b = std::fopen(paths.back().c_str(), "rb");
      if (!b || std::fread(buffers.back()->data(), 1, sizes.back(), b) != sizes.back()) die("cannot read a buffer");
      std::fclose(b);
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
      return reinterpret_cast<T>(buffers.at(i - 1)->data());
    } else if constexpr (std::is_same_v<std::remove_cv_t<T>, float>) {
      if (kind != "f") die("a float parameter needs 'f HEXBITS'");
      return __uint_as_float(static_cast<unsigned>(std::strtoull(word().c_str(), nullptr, 16)));
    } else if constexpr (std::is_same_v<std::remove_cv_t<T>, double>) {
      if (kind != "d") die("a double parameter needs 'd HEXBITS'");
      return __longlong_as_double(static_cast<long long>(std::strtoull(word().c_str(), nullptr, 16)));
    } else {
      static_assert(std::is_integral_v<T>, "a kernel parameter the host runner cannot pass");
      if (kind != "i") die("an integer parameter needs 'i VALUE'");
      return static_cast<T>(std::strtoll(word().c_str(), nullptr, 10));
    }
  }

  void write_back() {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (!buffers[i]->intact()) die("a write landed next to a buffer, outside it");
      FILE* b = std::fopen(paths[i].c_str(), "wb");
      if (!b || std::fwrite(buffers[i]->data(), 1, sizes[i], b) != sizes[i]) die("cannot write a buffer");
      std::fclose(b);
    }
  }
};

}  // namespace host_cuda
