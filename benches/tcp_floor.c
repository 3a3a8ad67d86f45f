/* The floor of a 1 B one-way message between two processes over loopback
 * TCP: two processes, one connection (TCP_NODELAY), each side sends one byte
 * with send() and waits for the answer in recv(), blocking, or with `spin`
 * as its second argument spinning on a non-blocking recv() as a polling MPI
 * progress engine would. No framing, no matching, no scheduler: what is
 * left of a transport once everything above the system calls costs
 * nothing. Prints the one-way time in microseconds.
 *
 * Beside `pingpong --processes 2 --sizes 1` over `MYRIAD_TRANSPORT=tcp`
 * and `ofi` and libfabric's own `fi_pingpong -p tcp -e rdm -S 1`, it splits
 * a one-way into the kernel's part and ours (README, issue 15's table).
 *
 *   cc -O2 -o tcp_floor benches/tcp_floor.c && ./tcp_floor [MESSAGES [spin]]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die("TCP_NODELAY");
}

static int spin;

/* Waits for one byte: blocking in recv(), or spinning on it (`spin`). */
static void take(int fd) {
    char b;
    for (;;) {
        ssize_t n = recv(fd, &b, 1, spin ? MSG_DONTWAIT : 0);
        if (n == 1)
            return;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            die("recv");
    }
}

static void give(int fd) {
    char b = 1;
    if (send(fd, &b, 1, 0) != 1)
        die("send");
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100000;
    spin = argc > 2 && argv[2][0] == 's';
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(listener, 1) != 0 || getsockname(listener, (struct sockaddr *)&addr, &len) != 0)
        die("listen");
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0)
            die("connect");
        nodelay(fd);
        for (long i = 0; i < rounds + rounds / 10; i++) {
            take(fd);
            give(fd);
        }
        _exit(0);
    }
    int fd = accept(listener, NULL, NULL);
    if (fd < 0)
        die("accept");
    nodelay(fd);
    struct timespec t0, t1;
    /* A tenth of the rounds warm up, then the timed ones. */
    for (long i = 0; i < rounds / 10; i++) {
        give(fd);
        take(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < rounds; i++) {
        give(fd);
        take(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waitpid(child, NULL, 0);
    double us = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
    printf("%.4f\n", us / rounds / 2);
    return 0;
}
