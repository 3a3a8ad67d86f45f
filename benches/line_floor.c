/* The floor of a one-way message between two threads of one process: two
 * threads, bound to the first two CPUs this process may use, hand a counter
 * back and forth through one cache line (a store, then a spin until the peer's
 * answer). Prints the one-way time in microseconds. benches/vs_mpi.sh runs it
 * in every round beside the ping-pongs: on a VM this floor moves with where
 * the host puts the vCPUs (0.025 or 0.08 us were both seen on the
 * development VM), and the 2-worker ping-pong moves with it.
 *
 *   cc -O2 -pthread -o line_floor benches/line_floor.c && ./line_floor [MESSAGES]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Alignas(64) atomic_long line;
static long rounds = 1000000;
static int cpus[2] = {-1, -1};

static void bind_to(int cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *answer(void *unused) {
    (void)unused;
    bind_to(cpus[1]);
    for (long i = 1; i <= rounds; i++) {
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i - 1)
            ;
        atomic_store_explicit(&line, 2 * i, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1)
        rounds = atol(argv[1]) / 2;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 2) {
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[k++] = c;
    }
    bind_to(cpus[0]);
    pthread_t peer;
    pthread_create(&peer, NULL, answer, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 1; i <= rounds; i++) {
        atomic_store_explicit(&line, 2 * i - 1, memory_order_release);
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(peer, NULL);
    double us = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
    printf("%.4f\n", us / (2.0 * rounds));
    return 0;
}
