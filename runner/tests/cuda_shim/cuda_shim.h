// CUDA's execution model on the CPU, for runner/tests/cuda_emulated.rs:
// generated CUDA C compiles as C++ after this header, and `cuda_shim::launch`
// runs a kernel the way the device would.
//
// * `threadIdx`, `blockIdx`, `blockDim`, `gridDim`: thread_local globals the
//   scheduler sets before it resumes a GPU thread.
// * Blocks run one after the other, the last first; inside a block every
//   GPU thread is a fiber with its own stack (a guard page below it), run
//   until it returns or reaches `__syncthreads()`, which switches back to
//   the scheduler. When every live thread of the block waits at the
//   barrier, all resume; a thread that returned while others wait is a
//   divergent barrier, reported for the launch (`DIVERGENT_BARRIER`). Odd
//   blocks run their threads in reverse order, so a missing barrier shows
//   up as a wrong result (and a block relying on an earlier one does too).
// * A launch CUDA would refuse (no blocks, more than 2^31 - 1, no threads
//   or more than 1024 per block) is reported (`INVALID_CONFIGURATION`).
// * `__shared__` is a function-static (one block at a time per OS thread).
// * Atomics are the compiler's `__atomic` built-ins; math is libm's (the
//   generated kernels call the single-precision functions: glibc's are
//   within 1 ulp, CUDA's within 1-4 ulp by the CUDA Math API's table, so a
//   GPU's results differ from the shim's by a few ulps of each call).
//
// The fiber switch is 20 lines of x86-64 assembly (callee-saved registers,
// MXCSR and the x87 control word); other machines (or -DCUDA_SHIM_UCONTEXT)
// use <ucontext.h>. Compile with -fcf-protection=none (a fiber's first
// entry is a `ret` to a made-up return address, which a shadow stack would
// refuse).
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __shared__ static thread_local

struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
};

// External linkage, so that the compiler reloads them after every call it
// cannot see into (the fiber switch).
thread_local uint3 threadIdx;
thread_local uint3 blockIdx;
thread_local dim3 blockDim;
thread_local dim3 gridDim;

// CUDA's integer max/min (the generated code calls them on `long long`).
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }

static inline int atomicCAS(int* a, int compare, int val) {
  __atomic_compare_exchange_n(a, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return compare;
}
static inline int atomicAdd(int* a, int v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
static inline int atomicExch(int* a, int v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }
template <class T>
static inline T atomic_float_add(T* a, T v) {
  T old, want;
  __atomic_load(a, &old, __ATOMIC_SEQ_CST);
  do {
    want = old + v;
  } while (!__atomic_compare_exchange(a, &old, &want, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  return old;
}
static inline float atomicAdd(float* a, float v) { return atomic_float_add(a, v); }
static inline double atomicAdd(double* a, double v) { return atomic_float_add(a, v); }

namespace cuda_shim {

// Launch failures the shim detects (besides the kernel's own error word):
// a divergent barrier; a configuration CUDA refuses (no blocks, more than
// 2^31 - 1, no threads or more than 1024 per block).
enum { OK = 0, DIVERGENT_BARRIER = 1, INVALID_CONFIGURATION = 3 };

#if defined(__x86_64__) && !defined(CUDA_SHIM_UCONTEXT)
#define CUDA_SHIM_ASM 1
extern "C" void cuda_shim_switch(void** save, void* load);
asm(R"(
  .text
  .globl cuda_shim_switch
  .type cuda_shim_switch, @function
cuda_shim_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_shim_switch, .-cuda_shim_switch
)");
#else
}  // namespace cuda_shim
#include <ucontext.h>
namespace cuda_shim {
#endif

const size_t STACK = 256 << 10;
const unsigned MAX_THREADS = 1024;

enum State : unsigned char { RUNNABLE, AT_BARRIER, DONE };

struct Fiber {
  char* stack;  // its lowest byte (a guard page)
#if defined(CUDA_SHIM_ASM)
  void* sp;
#else
  ucontext_t ctx;
#endif
};

struct Scheduler {
  Fiber fibers[MAX_THREADS];
  unsigned made = 0;  // fibers with a stack
  State state[MAX_THREADS];
  unsigned cur = 0;
  void (*body)(void*) = nullptr;
  void* ctx = nullptr;
#if defined(CUDA_SHIM_ASM)
  void* main_sp = nullptr;
#else
  ucontext_t main_ctx;
#endif
};

static thread_local Scheduler S;

static void to_scheduler(unsigned me) {
#if defined(CUDA_SHIM_ASM)
  cuda_shim_switch(&S.fibers[me].sp, S.main_sp);
#else
  swapcontext(&S.fibers[me].ctx, &S.main_ctx);
#endif
}

static void to_fiber(unsigned t) {
#if defined(CUDA_SHIM_ASM)
  cuda_shim_switch(&S.main_sp, S.fibers[t].sp);
#else
  swapcontext(&S.main_ctx, &S.fibers[t].ctx);
#endif
}

// A fiber runs one GPU thread after another (the scheduler resumes it with
// `S.cur` set to its index), switching back after each.
[[noreturn]] static void fiber_main() {
  for (;;) {
    unsigned me = S.cur;
    S.body(S.ctx);
    S.state[me] = DONE;
    to_scheduler(me);
  }
}

// Fiber `t` at its first instruction (again, after a divergent barrier
// abandoned the GPU thread it ran).
static void reset_fiber(unsigned t) {
  Fiber& f = S.fibers[t];
  char* top = f.stack + STACK;
#if defined(CUDA_SHIM_ASM)
  // What cuda_shim_switch pops: MXCSR and x87 control word, six registers,
  // the return address (fiber_main), and a fake return address for
  // fiber_main itself, so that it starts with the stack aligned as after a
  // call.
  uint64_t* frame = (uint64_t*)top - 9;
  memset(frame, 0, 9 * sizeof(uint64_t));
  uint32_t mxcsr = 0x1F80;
  uint16_t fcw = 0x037F;
  memcpy((char*)frame, &mxcsr, 4);
  memcpy((char*)frame + 4, &fcw, 2);
  frame[7] = (uint64_t)(void*)&fiber_main;
  f.sp = frame;
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack + 4096;
  f.ctx.uc_stack.ss_size = STACK - 4096;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, (void (*)())fiber_main, 0);
#endif
}

static void make_fibers(unsigned n) {
  for (; S.made < n; ++S.made) {
    char* stack = (char*)mmap(nullptr, STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                              -1, 0);
    if (stack == MAP_FAILED) {
      perror("cuda_shim: mmap");
      exit(70);
    }
    mprotect(stack, 4096, PROT_NONE);
    S.fibers[S.made].stack = stack;
    reset_fiber(S.made);
  }
}

// One block of `n` threads (see the file's comment); 0 or DIVERGENT_BARRIER.
static int run_block(unsigned n, bool reverse) {
  for (unsigned t = 0; t < n; ++t) S.state[t] = RUNNABLE;
  for (;;) {
    for (unsigned k = 0; k < n; ++k) {
      unsigned t = reverse ? n - 1 - k : k;
      if (S.state[t] == DONE) continue;
      S.state[t] = RUNNABLE;
      S.cur = t;
      threadIdx = uint3{t, 0, 0};
      to_fiber(t);
    }
    unsigned waiting = 0, done = 0;
    for (unsigned t = 0; t < n; ++t) {
      waiting += S.state[t] == AT_BARRIER;
      done += S.state[t] == DONE;
    }
    if (waiting == 0) return OK;
    if (done > 0) {
      for (unsigned t = 0; t < n; ++t)
        if (S.state[t] == AT_BARRIER) reset_fiber(t);
      return DIVERGENT_BARRIER;
    }
  }
}

// Run `f` (the kernel call) as a grid of `grid` blocks of `block` threads
// (x only, as the backend launches); gives 0 or the first failure.
template <class F>
int launch(unsigned grid, unsigned block, F f) {
  if (grid == 0 || grid > 0x7fffffffu || block == 0 || block > MAX_THREADS) return INVALID_CONFIGURATION;
  make_fibers(block);
  S.body = [](void* c) { (*(F*)c)(); };
  S.ctx = &f;
  gridDim = dim3{grid, 1, 1};
  blockDim = dim3{block, 1, 1};
  int status = OK;
  for (unsigned k = 0; k < grid; ++k) {
    unsigned b = grid - 1 - k;
    blockIdx = uint3{b, 0, 0};
    int s = run_block(block, b % 2 == 1);
    if (status == OK) status = s;
  }
  return status;
}

}  // namespace cuda_shim

static void __syncthreads() {
  unsigned me = cuda_shim::S.cur;
  cuda_shim::S.state[me] = cuda_shim::AT_BARRIER;
  cuda_shim::to_scheduler(me);
}
