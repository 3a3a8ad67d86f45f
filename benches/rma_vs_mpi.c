/* The C twin of examples/rma_bench.rs: the same rows, measured the same
 * way, on MPICH (or any MPI-3 library). Built and run by rma_vs_mpi.sh.
 *
 *   rma_vs_mpi [--sizes 8,1024,...] [--ops create_free,barrier,...] [--iters 200]
 *
 * Prints `operation bytes ranks latency_us` rows: the median of 5
 * repetitions of the slowest rank's average per iteration, repetitions of
 * all rows alternating. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *ALL_OPS = "create_free,barrier,get,lock_get_unlock,lock_all_gets,put_flush,put_vector,fetch_and_op";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int iterations(const char *op, size_t bytes, int ranks, int iters) {
    long per_byte = (long)iters * 8192 / (long)(bytes ? bytes : 1);
    if (per_byte < 3) per_byte = 3;
    int n = iters < per_byte ? iters : (int)per_byte;
    if (!strcmp(op, "create_free") || !strcmp(op, "barrier")) {
        long v = (long)iters * 64 / ranks;
        if (v < 5) v = 5;
        if (v > iters) v = iters;
        return (int)v;
    }
    if (!strcmp(op, "lock_all_gets")) {
        long v = (long)n * 16 / ranks;
        if (v < 3) v = 3;
        if (v > n) v = n;
        return (int)v;
    }
    return n;
}

static double origin(MPI_Win win, const char *op, uint64_t *out, size_t elems, int size, int iters) {
    int target = 1 % size;
    double start, t;
    if (!strcmp(op, "get")) {
        MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Get(out, (int)elems, MPI_UINT64_T, target, 0, (int)elems, MPI_UINT64_T, win);
            MPI_Win_flush_local(target, win); /* a Rust get has completed when it returns */
        }
        t = MPI_Wtime() - start;
        MPI_Win_unlock(target, win);
        return t;
    }
    if (!strcmp(op, "lock_get_unlock")) {
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win);
            MPI_Get(out, (int)elems, MPI_UINT64_T, target, 0, (int)elems, MPI_UINT64_T, win);
            MPI_Win_unlock(target, win);
        }
        return MPI_Wtime() - start;
    }
    if (!strcmp(op, "lock_all_gets")) {
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Win_lock_all(0, win);
            for (int r = 0; r < size; r++)
                MPI_Get(out, (int)elems, MPI_UINT64_T, r, 0, (int)elems, MPI_UINT64_T, win);
            MPI_Win_unlock_all(win);
        }
        return MPI_Wtime() - start;
    }
    if (!strcmp(op, "put_flush")) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Put(out, (int)elems, MPI_UINT64_T, target, 0, (int)elems, MPI_UINT64_T, win);
            MPI_Win_flush(target, win);
        }
        t = MPI_Wtime() - start;
        MPI_Win_unlock(target, win);
        return t;
    }
    if (!strcmp(op, "put_vector")) {
        MPI_Datatype every_other;
        MPI_Type_vector((int)elems, 1, 2, MPI_UINT64_T, &every_other);
        MPI_Type_commit(&every_other);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Put(out, (int)elems, MPI_UINT64_T, target, 0, 1, every_other, win);
            MPI_Win_flush(target, win);
        }
        t = MPI_Wtime() - start;
        MPI_Win_unlock(target, win);
        MPI_Type_free(&every_other);
        return t;
    }
    if (!strcmp(op, "fetch_and_op")) {
        uint64_t one = 1, old;
        MPI_Win_lock_all(0, win);
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_UINT64_T, target, 0, MPI_SUM, win);
            MPI_Win_flush(target, win); /* the Rust call returns the old value */
        }
        t = MPI_Wtime() - start;
        MPI_Win_unlock_all(win);
        return t;
    }
    fprintf(stderr, "unknown operation %s\n", op);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 0;
}

static double measure(const char *op, size_t bytes, int iters, int rank, int size) {
    size_t elems = (bytes + 7) / 8;
    if (!elems) elems = 1;
    /* put_vector writes every other element: twice the room. */
    size_t room = strcmp(op, "put_vector") ? elems : 2 * elems;
    uint64_t *buf = malloc(room * 8), *out = calloc(elems, 8);
    for (size_t i = 0; i < room; i++) buf[i] = (uint64_t)rank;
    double elapsed = 0, start;
    MPI_Barrier(MPI_COMM_WORLD);
    if (!strcmp(op, "create_free")) {
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            MPI_Win win;
            MPI_Win_create(buf, (MPI_Aint)(elems * 8), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
            MPI_Win_free(&win);
        }
        elapsed = MPI_Wtime() - start;
    } else if (!strcmp(op, "barrier")) {
        start = MPI_Wtime();
        for (int i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_WORLD);
        elapsed = MPI_Wtime() - start;
    } else {
        MPI_Win win;
        MPI_Win_create(buf, (MPI_Aint)(room * 8), 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) elapsed = origin(win, op, out, elems, size, iters);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Win_free(&win);
    }
    double slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    free(buf);
    free(out);
    return slowest * 1e6 / iters;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char sizes_arg[512] = "8,64,1024,8192,65536,1048576", ops_arg[512];
    strcpy(ops_arg, ALL_OPS);
    int iters = 200;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--sizes")) snprintf(sizes_arg, sizeof sizes_arg, "%s", argv[i + 1]);
        if (!strcmp(argv[i], "--ops")) snprintf(ops_arg, sizeof ops_arg, "%s", argv[i + 1]);
        if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    }
    size_t sizes[32];
    int nsizes = 0;
    for (char *s = strtok(sizes_arg, ","); s && nsizes < 32; s = strtok(NULL, ","))
        sizes[nsizes++] = (size_t)atol(s);
    char *ops[16];
    int nops = 0;
    for (char *s = strtok(ops_arg, ","); s && nops < 16; s = strtok(NULL, ",")) ops[nops++] = s;
    /* The cases, their repetitions alternating as in rma_bench. */
    const char *case_op[256];
    size_t case_bytes[256];
    double reps[256][5];
    int ncases = 0;
    for (int o = 0; o < nops; o++) {
        int single = !strcmp(ops[o], "fetch_and_op") || !strcmp(ops[o], "barrier");
        for (int k = 0; k < (single ? 1 : nsizes) && ncases < 256; k++) {
            case_op[ncases] = ops[o];
            case_bytes[ncases++] = single ? 8 : sizes[k];
        }
    }
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < ncases; c++)
            reps[c][r] = measure(case_op[c], case_bytes[c],
                                 iterations(case_op[c], case_bytes[c], size, iters), rank, size);
    for (int c = 0; c < ncases; c++) {
        qsort(reps[c], 5, sizeof reps[c][0], cmp_double);
        if (rank == 0) printf("%s %zu %d %.3f\n", case_op[c], case_bytes[c], size, reps[c][2]);
    }
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
