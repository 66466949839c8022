// LD_PRELOAD crash handler for benchmarks/cuda_triage.py: on SIGSEGV/SIGABRT/SIGBUS print the native stack (library +
// offset, nearest exported symbol) to stderr, then die as before. gcc -shared -fPIC -o segv_backtrace.so segv_backtrace.c -ldl
#define _GNU_SOURCE
#include <signal.h>
#include <execinfo.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>
#include <dlfcn.h>
static void on_signal(int sig, siginfo_t *si, void *uc) {
    void *frames[64];
    char line[1024];
    int n = backtrace(frames, 64);
    int len = snprintf(line, sizeof line, "\n=== NATIVE sig %d addr %p, %d frames\n", sig, si->si_addr, n);
    (void)!write(2, line, len);
    for (int i = 0; i < n; i++) {
        Dl_info d;
        if (dladdr(frames[i], &d) && d.dli_fname) {
            len = snprintf(line, sizeof line, "#%d %s +0x%lx (%s+0x%lx)\n", i, d.dli_fname,
                           (unsigned long)((char *)frames[i] - (char *)d.dli_fbase), d.dli_sname ? d.dli_sname : "?",
                           d.dli_saddr ? (unsigned long)((char *)frames[i] - (char *)d.dli_saddr) : 0UL);
        } else {
            len = snprintf(line, sizeof line, "#%d %p\n", i, frames[i]);
        }
        (void)!write(2, line, len);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}
__attribute__((constructor)) static void install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, 0);
    sigaction(SIGABRT, &sa, 0);
    sigaction(SIGBUS, &sa, 0);
}
