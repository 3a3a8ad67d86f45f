/* A model, in C, of a 1 B one-way message between ranks of two workers, to
 * price the cache lines a protocol moves between the cores before building it
 * in the runtime. Two threads, bound to the first two CPUs this process may
 * use, ping-pong through two mailboxes laid out as `p2p::mailbox::Mailbox`
 * (192 bytes: the unexpected queue's line, the posted queue's line, then the
 * first posted receive beside the lock word), each message found posted or
 * queued as unexpected, as in `p2p::arrive`:
 *
 *   completion (mode 0, what `p2p` does): the receiver posts its buffer and a
 *     completion on its own stack under its mailbox lock, then spins on the
 *     completion; the sender locks the receiver's mailbox, takes the posted
 *     receive, copies the byte into the receiver's buffer, writes the outcome
 *     into the completion and swaps its state to done. Lines on the way of a
 *     one-way: the mailbox's (the sender's lock), the completion's (the
 *     sender's write, the receiver's reload), the buffer's.
 *   data in the completion (mode 2): as mode 0, but the byte travels in the
 *     completion and the receiver copies it into its buffer (tried in the
 *     runtime twice, on 2026-12-02 and 2026-12-04: no gain, as here).
 *   resident (mode 1): the sender leaves the outcome
 *     and the byte in the taken receive's place in the mailbox line and
 *     releases the lock with a "delivered" bit, on which the receiver spins:
 *     one line, taken by the sender's lock and read back by the receiver, as
 *     in line_floor.c plus the lock's read-modify-write.
 *   resident, read under the lock (mode 3): as mode 1, but the receiver, once
 *     it sees the bit, takes its mailbox lock to read the record and clear the
 *     bit (what a sound build in Rust would do: the record then lives in the
 *     lock's data, never read while another thread holds the guard). Faster
 *     still than mode 1: the receiver's lock takes the line for writing, which
 *     its next post needs anyway. Built in the runtime (2026-12-04, blocking
 *     receives of up to 16 bytes: `p2p::mailbox::Delivery`), it read mode 0's
 *     time until the receiver polled the line every ~100 ns instead of every
 *     `pause` (`sched/pace.rs`): the runtime's sender holds the line for a few
 *     dozen instructions, this model's for a few stores, and a poll in the
 *     middle takes the line away from it.
 *
 * Prints the one-way time in microseconds. Run it beside `line_floor` and
 * `pingpong --workers 2 --sizes 1`. On the development VM (2026-12-04
 * 08:58-09:11, 38 rounds over its three states) mode 0 read what the runtime
 * reads in each state (e.g. slow: 0.33-0.36 us, `pingpong` 0.33-0.37), mode 2
 * the same as mode 0, and mode 1 less in every round: 1.39x on average over 20
 * rounds, 1.5-1.6x in the slow state (0.21-0.23 us), 1.0-1.6x in the others
 * (mode 1 steady at 0.059-0.068 where mode 0 moved between 0.064 and 0.10).
 * At 09:50, 16 rounds in the slow state: mode 0 0.275-0.320 us, mode 1
 * 0.207-0.222 (1.44x less on average), mode 3 0.187-0.201 (1.59x less).
 *
 *   cc -O2 -pthread -o /tmp/handoff_model benches/handoff_model.c
 *   /tmp/handoff_model 0|1|2|3 [MESSAGES]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define PAUSE() _mm_pause()
#else
#define PAUSE() ((void)0)
#endif

/* `p2p::completion::Outcome`: 56 bytes, with the state and waiter before it. */
typedef struct {
    long source, tag, bytes, cancelled, fault[2], flow;
} outcome_t;

typedef struct {
    atomic_int state;
    int waiter;
    outcome_t out;
} completion_t;

#define LOCKED 1
#define DELIVERED 2

typedef struct {
    /* Line 0: the unexpected queue (here one message). */
    _Alignas(64) long unexpected;
    long unexpected_byte;
    char pad0[48];
    /* Line 1: the posted queue after the first receive (unused here). */
    char pad1[64];
    /* Line 2: the first posted receive and the lock word; in mode 1 also
     * what a delivery leaves for the receiver. */
    _Alignas(64) char *dst;
    completion_t *completion;
    long spec[2];
    int has_first;
    atomic_int lock;
    int r_source, r_tag, r_bytes;
    char r_data[4];
} mailbox_t;

_Static_assert(sizeof(mailbox_t) == 192, "a mailbox is three lines");

static mailbox_t mailbox[2];
static long rounds = 1000000;
static int mode;
static int cpus[2] = {-1, -1};

static void bind_to(int cpu) {
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Takes the lock; returns the word's other bits. */
static int lock(mailbox_t *m) {
    for (;;) {
        int w = atomic_load_explicit(&m->lock, memory_order_relaxed);
        if (!(w & LOCKED) &&
            atomic_compare_exchange_weak_explicit(&m->lock, &w, w | LOCKED, memory_order_acquire,
                                                  memory_order_relaxed))
            return w;
        PAUSE();
    }
}

static void unlock(mailbox_t *m, int bits) {
    atomic_store_explicit(&m->lock, bits & ~LOCKED, memory_order_release);
}

static void send_byte(mailbox_t *m, char byte) {
    int w = lock(m);
    if (!m->has_first) {
        m->unexpected = 1;
        m->unexpected_byte = byte;
        unlock(m, w);
        return;
    }
    m->has_first = 0;
    if (mode == 0 || mode == 2) {
        completion_t *c = m->completion;
        if (mode == 0)
            *m->dst = byte;
        c->out = (outcome_t){.source = 1, .bytes = 1, .flow = byte};
        atomic_exchange_explicit(&c->state, 1, memory_order_acq_rel);
        unlock(m, w);
    } else {
        m->r_source = 1;
        m->r_tag = 0;
        m->r_bytes = 1;
        m->r_data[0] = byte;
        unlock(m, w | DELIVERED);
    }
}

static char receive_byte(mailbox_t *m, char *buf) {
    completion_t c;
    int w = lock(m);
    if (m->unexpected) {
        m->unexpected = 0;
        *buf = (char)m->unexpected_byte;
        unlock(m, w & ~DELIVERED);
        return *buf;
    }
    m->dst = buf;
    m->has_first = 1;
    if (mode == 0 || mode == 2) {
        atomic_store_explicit(&c.state, 0, memory_order_relaxed);
        m->completion = &c;
        unlock(m, w & ~DELIVERED);
        while (atomic_load_explicit(&c.state, memory_order_acquire) == 0)
            PAUSE();
        if (mode == 2)
            *buf = (char)c.out.flow; /* `flow` stands for the inline bytes */
        volatile long bytes = c.out.bytes;
        (void)bytes;
    } else {
        unlock(m, w & ~DELIVERED);
        while (!(atomic_load_explicit(&m->lock, memory_order_acquire) & DELIVERED))
            PAUSE();
        if (mode == 3) {
            int held = lock(m);
            unlock(m, held & ~DELIVERED);
        }
        *buf = m->r_data[0];
        volatile int bytes = m->r_bytes;
        (void)bytes;
    }
    return *buf;
}

static void *party(void *arg) {
    long me = (long)arg;
    bind_to(cpus[me]);
    char *buf = malloc(64);
    buf[0] = 0;
    for (long i = 0; i < rounds; i++) {
        if (me == 0) {
            send_byte(&mailbox[1], (char)(buf[0] + 1));
            receive_byte(&mailbox[0], buf);
        } else {
            receive_byte(&mailbox[1], buf);
            send_byte(&mailbox[0], (char)(buf[0] + 1));
        }
    }
    long last = (unsigned char)buf[0];
    free(buf);
    return (void *)last;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] < '0' || argv[1][0] > '3' || argv[1][1]) {
        fprintf(stderr, "usage: handoff_model 0|1|2|3 [MESSAGES]\n");
        return 2;
    }
    mode = argv[1][0] - '0';
    if (argc > 2)
        rounds = atol(argv[2]) / 2;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 2) {
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[k++] = c;
    }
    pthread_t peer;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_create(&peer, NULL, party, (void *)1);
    long mine = (long)party((void *)0);
    void *theirs;
    pthread_join(peer, &theirs);
    clock_gettime(CLOCK_MONOTONIC, &b);
    /* Each side adds one to what it received: both end on 2 * rounds (mod 256). */
    if (mine != (2 * rounds) % 256 || (long)theirs != (2 * rounds - 1) % 256) {
        fprintf(stderr, "handoff_model: lost a message (%ld, %ld)\n", mine, (long)theirs);
        return 1;
    }
    double us = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
    printf("%.4f\n", us / (2.0 * rounds));
    return 0;
}
