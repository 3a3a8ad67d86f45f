/* The kernel's floor under a big job's start-up: every rank's stack costs at
 * least the page fault of its top page. This maps PAGES slots of 256 KiB (the
 * stack pool's default slot) with MAP_NORESERVE and writes one byte near the
 * top of each from THREADS threads (the workers), each taking its own half of
 * adjacent slots as the pool hands them out, and prints the time of the writes
 * and the CPU time per page. The process's exit then frees the pages, as the
 * end of `hello` does: time the whole program to see that part too. On the
 * development VM the time per page moves with the host (fresh guest memory
 * after an idle spell costs several times more) and grows with the job: run it
 * right beside `hello` with the same number of ranks.
 *
 *   cc -O2 -pthread -o /tmp/fault_floor benches/fault_floor.c
 *   /usr/bin/time /tmp/fault_floor [PAGES] [THREADS]     # default 1000000 2
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define SLOT (256L * 1024)

static char *base;
static long pages = 1000000, threads = 2;

static void *touch(void *arg)
{
    long t = (long)arg, per = pages / threads;
    for (long i = t * per; i < (t + 1) * per; i++)
        base[i * SLOT + SLOT - 64] = 1;
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc > 1) pages = atol(argv[1]);
    if (argc > 2) threads = atol(argv[2]);
    if (pages < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: fault_floor [PAGES >= 1] [THREADS 1..64]\n");
        return 2;
    }
    base = mmap(NULL, pages * SLOT, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    pthread_t th[64];
    double start = now();
    for (long t = 0; t < threads; t++)
        pthread_create(&th[t], NULL, touch, (void *)t);
    for (long t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    double s = now() - start;
    printf("pages %ld threads %ld faults_s %.3f cpu_us_per_page %.2f\n",
           pages, threads, s, s * threads * 1e6 / pages);
    return 0;
}
