// The driver of runner/tests/cuda_emulated.rs: after cuda_shim.h and the
// kernel sources, `cuda_shim::drive` reads a jobs file (its format is
// `encode_jobs` in the test), runs each job's launches through the source's
// launcher and writes, per job, a status (0, a shim failure from
// cuda_shim.h, or WROTE_OUTSIDE) and the buffers the kernel returns.
//
// Buffers are fenced: GUARD bytes of a pattern before and after each, checked
// after the job. Buffers the kernel writes start as NaN (so an element the
// kernel never writes is a mismatch); the error word starts as zero. A crash
// prints the job it happened in (a stack overflow included: the handler runs
// on its own stack).
#pragma once

#include <signal.h>

namespace cuda_shim {

// Launch function `fn` of a source with the job's buffers `a` and kernel id.
typedef int (*Launcher)(unsigned fn, unsigned blocks, unsigned threads, void* const* a, int kid);

enum { WROTE_OUTSIDE = 2 };

const size_t GUARD = 64;
const unsigned char PATTERN = 0xA5;

// Buffer kinds (the test's `Buf::code`): element size, whether the file
// holds its data, whether it is returned, how it starts.
enum Kind { IN = 0, OUT = 1, WORK = 2, INTS = 3, REALS = 4, ERROR_WORD = 5, IN_OUT = 6, BYTES = 7 };

static size_t elem_size(uint64_t k) {
  switch (k) {
    case IN: case OUT: case WORK: case REALS: case ERROR_WORD: case IN_OUT: return 4;
    case INTS: return 8;
    default: return 1;
  }
}
static bool has_data(uint64_t k) { return k == IN || k == INTS || k == REALS || k == IN_OUT || k == BYTES; }
static bool returned(uint64_t k) { return k == OUT || k == ERROR_WORD || k == IN_OUT; }

static volatile long long current_job = -1;

static void on_crash(int sig) {
  char msg[96];
  int n = snprintf(msg, sizeof msg, "cuda_shim: signal %d in job %lld\n", sig, (long long)current_job);
  if (write(2, msg, n) < 0) {
  }
  _exit(3);
}

struct Reader {
  const unsigned char* p;
  const unsigned char* end;
  uint64_t u64() {
    uint64_t v;
    need(8);
    memcpy(&v, p, 8);
    p += 8;
    return v;
  }
  void need(size_t n) {
    if ((size_t)(end - p) < n) {
      fprintf(stderr, "cuda_shim: the jobs file ends early\n");
      exit(65);
    }
  }
};

static unsigned char* read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(66);
  }
  fseek(f, 0, SEEK_END);
  *len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* b = (unsigned char*)malloc(*len + 1);
  if (fread(b, 1, *len, f) != *len) {
    perror(path);
    exit(66);
  }
  fclose(f);
  return b;
}

static int drive(int argc, char** argv, const Launcher* sources, unsigned n_sources) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s JOBS RESULTS\n", argv[0]);
    return 64;
  }
  static char alt[64 << 10];
  stack_t ss;
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_crash;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
  sigaction(SIGFPE, &sa, nullptr);
  sigaction(SIGILL, &sa, nullptr);

  size_t len;
  unsigned char* file = read_file(argv[1], &len);
  Reader r{file, file + len};
  FILE* out = fopen(argv[2], "wb");
  if (!out) {
    perror(argv[2]);
    return 73;
  }
  uint64_t jobs = r.u64();
  for (uint64_t j = 0; j < jobs; ++j) {
    current_job = (long long)j;
    uint64_t src = r.u64();
    int kid = (int)r.u64();
    uint64_t nbufs = r.u64();
    if (src >= n_sources) {
      fprintf(stderr, "cuda_shim: job %llu names source %llu\n", (unsigned long long)j,
              (unsigned long long)src);
      return 65;
    }
    uint64_t* kinds = new uint64_t[nbufs];
    size_t* bytes = new size_t[nbufs];
    unsigned char** raw = new unsigned char*[nbufs];
    void** a = new void*[nbufs + 1];
    for (uint64_t i = 0; i < nbufs; ++i) {
      uint64_t k = kinds[i] = r.u64();
      uint64_t n = r.u64();
      size_t b = bytes[i] = n * elem_size(k);
      // 16-byte aligned data between two guards.
      raw[i] = (unsigned char*)aligned_alloc(16, (b + 2 * GUARD + 15) / 16 * 16);
      memset(raw[i], PATTERN, GUARD);
      memset(raw[i] + GUARD + b, PATTERN, GUARD);
      unsigned char* d = raw[i] + GUARD;
      if (has_data(k)) {
        r.need(b);
        memcpy(d, r.p, b);
        r.p += b;
      } else if (k == ERROR_WORD) {
        memset(d, 0, b);
      } else {
        for (uint64_t e = 0; e < n; ++e) ((float*)d)[e] = NAN;
      }
      a[i] = d;
    }
    uint64_t status = OK;
    uint64_t nlaunch = r.u64();
    for (uint64_t l = 0; l < nlaunch; ++l) {
      unsigned fn = (unsigned)r.u64();
      unsigned blocks = (unsigned)r.u64();
      unsigned threads = (unsigned)r.u64();
      int s = sources[src](fn, blocks, threads, a, kid);
      if (s < 0) {
        fprintf(stderr, "cuda_shim: job %llu launches function %u of a source without it\n",
                (unsigned long long)j, fn);
        return 65;
      }
      if (status == OK) status = (uint64_t)s;
    }
    for (uint64_t i = 0; i < nbufs; ++i) {
      for (size_t g = 0; g < GUARD; ++g)
        if (raw[i][g] != PATTERN || raw[i][GUARD + bytes[i] + g] != PATTERN) {
          if (status == OK) status = WROTE_OUTSIDE;
          break;
        }
    }
    fwrite(&status, 8, 1, out);
    for (uint64_t i = 0; i < nbufs; ++i) {
      if (returned(kinds[i])) fwrite(raw[i] + GUARD, 1, bytes[i], out);
      free(raw[i]);
    }
    delete[] kinds;
    delete[] bytes;
    delete[] raw;
    delete[] a;
  }
  if (r.p != r.end) {
    fprintf(stderr, "cuda_shim: trailing bytes in the jobs file\n");
    return 65;
  }
  if (fclose(out) != 0) {
    perror(argv[2]);
    return 74;
  }
  free(file);
  return 0;
}

}  // namespace cuda_shim
