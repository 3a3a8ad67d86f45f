#!/usr/bin/env bash
# Ping-pong, myriad (examples/pingpong.rs) against MPICH and Open MPI
# (../shared/mpi-anchors/pingpong.c, vendored as benches/pingpong_vs_mpi.c)
# side by side in one run: seed 003's alpha-beta table, inside one host.
#
#   bash benches/vs_mpi.sh [ROUNDS] [ITERS]
#   defaults: ROUNDS=3 (alternating rounds; the table shows medians)  ITERS=0.2
#
# Two tables, one-way time in microseconds per message size:
#   shared memory: myriad's 2 ranks on 1 worker and on 2 workers of one
#                  process, and 2 processes of 1 rank each over the shared-
#                  memory transport (built-in launcher, MYRIAD_TRANSPORT=shm);
#                  MPICH (ch4's shared memory) and Open MPI (pml ob1, btl
#                  self,vader: its shared memory, CMA for large messages)
#                  with 2 processes;
#   TCP loopback:  myriad with 2 processes (built-in launcher,
#                  MYRIAD_TRANSPORT=tcp: auto would pick shared memory);
#                  MPICH with MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self (this
#                  MPICH is ch4:ucx) and Open MPI with pml ob1, btl self,tcp.
# Beside them, each round times benches/line_floor.c (two threads bound to
# two CPUs handing a counter through one cache line): the floor of a
# one-way message between two workers, which on a VM moves with where the
# host puts the vCPUs; its median and range head the first table, with the
# time of one memcpy of the largest size (pingpong's own reference): glibc's
# copy by one thread, against which MPI's two copies run (myriad copies
# messages larger than half the last-level cache with non-temporal stores,
# which this glibc uses only from 240 MiB, and on 2 workers shares copies
# of 1 MiB and more between them, so both its columns can beat it).
# The MPI tools are called by their full names (mpicc.mpich, mpiexec.mpich,
# mpicc.openmpi, mpirun.openmpi): the plain mpicc/mpirun alternatives may
# point at either. Open MPI runs as root here, so the script allows it.
# The ratio column is the better MPI over myriad (> 1: myriad is faster);
# below each table, the same ratio at 1 B round by round (the better MPI of
# a round over myriad's figure of that round): its range, and in how many
# rounds it reached 1, 1.5 and 5 (the targets of issues 12 and 15).
# Every configuration runs once per round, in the same order, so a noisy
# machine spreads over all of them alike. Without mpicc.mpich/mpicc.openmpi
# (and their headers: apt-get install mpich libmpich-dev openmpi-bin
# libopenmpi-dev) those columns are "-".
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
ITERS=${2:-0.2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cargo build --release --quiet --example pingpong
PP=target/release/examples/pingpong
have_mpich=0
have_ompi=0
# Debian's mpich and openmpi-bin ship the compiler wrappers without mpi.h:
# that is in libmpich-dev and libopenmpi-dev.
if command -v mpicc.mpich > /dev/null && command -v mpiexec.mpich > /dev/null; then
    mpicc.mpich -O2 -o "$out/pp.mpich" benches/pingpong_vs_mpi.c && have_mpich=1 ||
        echo "# MPICH left out: mpicc.mpich failed (mpi.h is in libmpich-dev)" >&2
fi
if command -v mpicc.openmpi > /dev/null && command -v mpirun.openmpi > /dev/null; then
    mpicc.openmpi -O2 -o "$out/pp.ompi" benches/pingpong_vs_mpi.c && have_ompi=1 ||
        echo "# Open MPI left out: mpicc.openmpi failed (mpi.h is in libopenmpi-dev)" >&2
fi
have_floor=0
if command -v cc > /dev/null; then
    cc -O2 -pthread -o "$out/line_floor" benches/line_floor.c && have_floor=1
fi
ompi=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    mpirun.openmpi --oversubscribe --mca pml ob1)
# One MPI run's rows appended to $out/<config>; a run that fails (or hangs
# for 10 minutes) leaves its round out with a note instead of ending the
# script, so the other columns still fill.
mpi_run() {
    local config=$1
    shift
    local rows
    if rows=$(timeout 600 "$@" 2> "$out/$config.err"); then
        mpi_rows <<< "$rows" >> "$out/$config"
    else
        echo "# $config failed this round: $(tail -n 3 "$out/$config.err" | tr '\n' ' ')" >&2
    fi
}

# Rows "bytes oneway_us round" of one run, appended to $out/<config> (the
# round pairs each MPI figure with myriad's of the same round, below).
myriad_rows() { grep -v '^#' | awk -v r="$round" '{ print $1, $2, r }'; }
# pingpong's "# memcpy B: MB/s" line as "B us" (one thread copying the
# largest size between two warm buffers): the floor of a single copy.
memcpy_row() { awk '/^# memcpy / { print $3, $3 / $5 }'; }
mpi_rows() { grep -v '^#' | awk -v r="$round" '{ print $1, $3, r }'; }

for round in $(seq "$ROUNDS"); do
    echo "# round $round of $ROUNDS" >&2
    if [ $have_floor = 1 ]; then
        "$out/line_floor" 1000000 >> "$out/floor"
    fi
    MYRIAD_WORKERS=1 "$PP" --iters "$ITERS" > "$out/1w.txt"
    myriad_rows < "$out/1w.txt" >> "$out/myriad_1w"
    memcpy_row < "$out/1w.txt" >> "$out/memcpy"
    MYRIAD_WORKERS=2 "$PP" --iters "$ITERS" | myriad_rows >> "$out/myriad_2w"
    MYRIAD_TRANSPORT=shm "$PP" --iters "$ITERS" --processes 2 | myriad_rows >> "$out/myriad_shm2p"
    MYRIAD_TRANSPORT=tcp "$PP" --iters "$ITERS" --processes 2 | myriad_rows >> "$out/myriad_tcp"
    if [ $have_mpich = 1 ]; then
        mpi_run mpich_shm mpiexec.mpich -n 2 "$out/pp.mpich" "$ITERS"
        mpi_run mpich_tcp env MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self \
            mpiexec.mpich -n 2 "$out/pp.mpich" "$ITERS"
    fi
    if [ $have_ompi = 1 ]; then
        mpi_run ompi_shm "${ompi[@]}" --mca btl self,vader -n 2 "$out/pp.ompi" "$ITERS"
        mpi_run ompi_tcp "${ompi[@]}" --mca btl self,tcp -n 2 "$out/pp.ompi" "$ITERS"
    fi
done

# The median per size of a configuration's rows ("-" when it did not run).
medians() {
    if [ -s "$out/$1" ]; then
        sort -k1,1n -k2,2g "$out/$1" | awk '
            { v[$1] = v[$1] " " $2; n[$1]++ }
            END { for (b in v) { split(substr(v[b], 2), a, " "); m = n[b];
                  med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2;
                  print b, med } }' | sort -k1,1n > "$out/$1.med"
    else
        : > "$out/$1.med"
    fi
}
for c in myriad_1w myriad_2w myriad_shm2p myriad_tcp mpich_shm mpich_tcp ompi_shm ompi_tcp; do
    medians "$c"
done

# One table: a column per configuration named after "--", then for each
# myriad configuration named before "--" the better MPI over it.
table() {
    local ratios=()
    while [ "$1" != "--" ]; do ratios+=("$1"); shift; done
    shift
    awk -v cols="$*" -v ratios="${ratios[*]}" -v dir="$out" '
        BEGIN {
            n = split(cols, c, " "); nr = split(ratios, r, " ")
            for (i = 1; i <= n; i++) {
                f = dir "/" c[i] ".med"
                while ((getline line < f) > 0) { split(line, p, " "); t[c[i], p[1]] = p[2]; sizes[p[1]] = 1 }
            }
            printf "# %9s", "bytes"
            for (i = 1; i <= n; i++) printf " %11s", c[i]
            for (i = 1; i <= nr; i++) printf " %16s", "mpi/" r[i]
            printf "\n"
            m = 0; for (b in sizes) s[++m] = b + 0
            for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (s[j] < s[i]) { x = s[i]; s[i] = s[j]; s[j] = x }
            for (k = 1; k <= m; k++) {
                b = s[k]; best = ""
                printf "  %9d", b
                for (i = 1; i <= n; i++) {
                    v = ((c[i], b) in t) ? t[c[i], b] : "-"
                    printf " %11s", v
                    if (c[i] ~ /^(mpich|ompi)/ && v != "-" && (best == "" || v + 0 < best + 0)) best = v
                }
                for (i = 1; i <= nr; i++) {
                    o = ((r[i], b) in t) ? t[r[i], b] : ""
                    if (best != "" && o != "" && o + 0 > 0) printf " %16.2f", best / o; else printf " %16s", "-"
                }
                printf "\n"
            }
        }'
}
echo "# one-way time (us), medians of $ROUNDS alternating rounds, --iters $ITERS"
echo "# shared memory (one host): myriad ranks of one process, and 2 processes (shm2p); MPI processes"
if [ -s "$out/floor" ]; then
    sort -g "$out/floor" | awk '{ v[++n] = $1 } END {
        med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        printf "# floor, two threads on one cache line (line_floor.c): %.4f us one-way (median of %d; %.4f-%.4f)\n", med, n, v[1], v[n] }'
fi
if [ -s "$out/memcpy" ]; then
    sort -k2,2g "$out/memcpy" | awk '{ b = $1; v[++n] = $2 } END {
        med = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
        printf "# memcpy of %d B, one thread, warm buffers: %.1f us (median of %d; %.1f-%.1f) (glibc; messages larger than half the last-level cache go through non-temporal stores, datatype/bulk.rs)\n", b, med, n, v[1], v[n] }'
fi
# Round by round at 1 B: the better MPI of each round over myriad's figure
# of the same round. On a VM whose cross-core latency changes between (and
# within) runs, medians of columns can come from rounds in different states;
# paired rounds cannot.
paired() {
    local mpis=$1
    shift
    for c in "$@"; do
        [ -s "$out/$c" ] || continue
        awk -v c="$c" -v mpis="$mpis" -v dir="$out" '
            BEGIN {
                n = split(mpis, m, " ")
                for (i = 1; i <= n; i++) {
                    f = dir "/" m[i]
                    while ((getline line < f) > 0) {
                        split(line, p, " ")
                        if (p[1] == 1 && (!(p[3] in best) || p[2] + 0 < best[p[3]])) best[p[3]] = p[2] + 0
                    }
                }
                f = dir "/" c
                while ((getline line < f) > 0) {
                    split(line, p, " ")
                    if (p[1] != 1 || !(p[3] in best) || p[2] + 0 <= 0) continue
                    x = best[p[3]] / p[2]; k++
                    if (k == 1 || x < lo) lo = x
                    if (k == 1 || x > hi) hi = x
                    if (x >= 1) one++
                    if (x >= 1.5) half++
                    if (x >= 5) five++
                }
                if (k) printf "#   %-13s better MPI / myriad %.2f-%.2f; >= 1 in %d, >= 1.5 in %d, >= 5 in %d of %d rounds\n", c, lo, hi, one, half, five, k
            }'
    done
}
table myriad_1w myriad_2w myriad_shm2p -- myriad_1w myriad_2w myriad_shm2p mpich_shm ompi_shm
echo "# 1 B, round by round:"
paired "mpich_shm ompi_shm" myriad_1w myriad_2w myriad_shm2p
echo "# TCP loopback: 2 processes each"
table myriad_tcp -- myriad_tcp mpich_tcp ompi_tcp
echo "# 1 B, round by round:"
paired "mpich_tcp ompi_tcp" myriad_tcp
