// hostprof.so: where a process's host CPU time goes, for programs nobody can run perf,
// gdb or nsys on (the GPU machine has none of them). Preloaded, it samples the process
// on ITIMER_PROF (CPU time, any thread), unwinds each sample with libgcc from the
// interrupted frame, and appends "tid seconds lib+offset ..." lines to HOSTPROF_OUT
// every half second, so a process that exits abruptly (Go's os.Exit runs no C
// destructors) still leaves its samples. summary.py symbolizes them.
//
//   gcc -O2 -shared -fPIC -o hostprof.so bench/hostprof/src/hostprof.c -ldl -lpthread
//   HOSTPROF_OUT=hp.txt HOSTPROF_START=2 LD_PRELOAD=$PWD/hostprof.so probe-mlx bench ...
//
// HOSTPROF_START (seconds, default 2): when sampling begins. It must be after the Go
// runtime's start, which installs its own SIGPROF handler over any earlier one.
// HOSTPROF_SECONDS (default 600): how long it samples. HOSTPROF_HZ (default 1000).
// Frames in Go code end a stack: Go's binaries carry no unwind tables for libgcc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#define MAXS 400000
#define MAXD 48
static uintptr_t pcs[MAXS][MAXD];
static uint8_t depth[MAXS];
static int tids[MAXS];
static double when[MAXS];
#include <time.h>
static uint64_t nsamples;
static struct sigaction oldact;

struct st { uintptr_t *buf; int n; };
static _Unwind_Reason_Code cb(struct _Unwind_Context *ctx, void *arg) {
  struct st *s = arg;
  if (s->n >= MAXD) return _URC_END_OF_STACK;
  uintptr_t pc = _Unwind_GetIP(ctx);
  if (pc == 0) return _URC_END_OF_STACK;
  s->buf[s->n++] = pc;
  return _URC_NO_REASON;
}

static void handler(int sig, siginfo_t *si, void *ucv) {
  (void)sig; (void)si;
  int saved = errno;
  uint64_t i = __atomic_fetch_add(&nsamples, 1, __ATOMIC_RELAXED);
  if (i < MAXS) {
    ucontext_t *uc = ucv;
    uintptr_t rip = uc->uc_mcontext.gregs[REG_RIP];
    uintptr_t tmp[MAXD];
    struct st s = {tmp, 0};
    _Unwind_Backtrace(cb, &s);
    // The first frames are this handler and the signal trampoline: the sample starts at
    // the interrupted instruction (libgcc reports a signal frame's exact pc).
    int k = 0;
    while (k < s.n && tmp[k] != rip) k++;
    int d = 0;
    if (k == s.n) { pcs[i][0] = rip; d = 1; }
    else for (; k < s.n && d < MAXD; k++) pcs[i][d++] = tmp[k];
    tids[i] = (int)syscall(SYS_gettid);
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    when[i] = ts.tv_sec + ts.tv_nsec * 1e-9;
    __atomic_store_n(&depth[i], (uint8_t)d, __ATOMIC_RELEASE);
  }
  errno = saved;
}

static uint64_t written;
// dump appends the samples taken since the last call, stopping at one still being written.
static void dump(FILE *f) {
  uint64_t n = __atomic_load_n(&nsamples, __ATOMIC_ACQUIRE);
  if (n > MAXS) n = MAXS;
  for (uint64_t i = written; i < n; i++) {
    if (!__atomic_load_n(&depth[i], __ATOMIC_ACQUIRE)) break;
    written = i + 1;
    fprintf(f, "%d %.4f", tids[i], when[i]);
    for (int d = 0; d < depth[i]; d++) {
      Dl_info info;
      if (dladdr((void *)pcs[i][d], &info) && info.dli_fname) {
        const char *b = strrchr(info.dli_fname, '/');
        fprintf(f, " %s+%lx", b ? b + 1 : info.dli_fname, (unsigned long)(pcs[i][d] - (uintptr_t)info.dli_fbase));
      } else fprintf(f, " ?+%lx", (unsigned long)pcs[i][d]);
    }
    fputc('\n', f);
  }
  fflush(f);
}

static void *run(void *arg) {
  (void)arg;
  double start = getenv("HOSTPROF_START") ? atof(getenv("HOSTPROF_START")) : 2;
  double secs = getenv("HOSTPROF_SECONDS") ? atof(getenv("HOSTPROF_SECONDS")) : 600;
  int hz = getenv("HOSTPROF_HZ") ? atoi(getenv("HOSTPROF_HZ")) : 1000;
  const char *out = getenv("HOSTPROF_OUT");
  usleep((useconds_t)(start * 1e6));
  FILE *f = fopen(out, "w");
  if (!f) return NULL;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, &oldact);
  struct itimerval it = {{0, 1000000 / hz}, {0, 1000000 / hz}};
  setitimer(ITIMER_PROF, &it, NULL);
  for (double t = 0; t < secs; t += 0.5) { usleep(500000); dump(f); }
  struct itimerval zero = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &zero, NULL);
  usleep(50000);
  sigaction(SIGPROF, &oldact, NULL);
  dump(f);
  fclose(f);
  return NULL;
}

__attribute__((constructor)) static void init(void) {
  if (!getenv("HOSTPROF_OUT")) return;
  uintptr_t tmp[4];
  struct st s = {tmp, 0};
  _Unwind_Backtrace(cb, &s); // load the unwinder before any signal
  pthread_t t;
  pthread_create(&t, NULL, run, NULL);
  pthread_detach(t);
}
