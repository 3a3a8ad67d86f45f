#!/usr/bin/env bash
# One-sided communication, myriad (examples/rma_bench.rs) against MPICH
# (benches/rma_vs_mpi.c, built with mpicc.mpich) side by side, with the
# ratio MPICH / myriad per row (> 1: myriad is faster).
#
#   bash benches/rma_vs_mpi.sh [RANKS] [SIZES] [OPS] [ITERS]
#   defaults: RANKS=2,4,16  SIZES=8,1024,65536,1048576  OPS=all  ITERS=200
#
# MPICH runs one process per rank (mpiexec.mpich -n P, oversubscribed on
# small machines: its ranks busy-poll); myriad runs P ranks as coroutines on
# its default workers. Without mpicc.mpich only myriad's rows are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
RANKS=${1:-2,4,16}
SIZES=${2:-8,1024,65536,1048576}
OPS=${3:-create_free,barrier,get,lock_get_unlock,lock_all_gets,put_flush,put_vector,fetch_and_op}
ITERS=${4:-200}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

cargo build --release --quiet --example rma_bench
target/release/examples/rma_bench --ranks "$RANKS" --sizes "$SIZES" --ops "$OPS" \
    --iters "$ITERS" | grep -v '^#' > "$out/myriad.txt"

if ! command -v mpicc.mpich > /dev/null; then
    echo "# mpicc.mpich not found: myriad only"
    echo "# operation bytes ranks latency_us"
    cat "$out/myriad.txt"
    exit 0
fi
mpicc.mpich -O2 -o "$out/rma_vs_mpi" benches/rma_vs_mpi.c
for p in ${RANKS//,/ }; do
    mpiexec.mpich -n "$p" "$out/rma_vs_mpi" --sizes "$SIZES" --ops "$OPS" --iters "$ITERS" \
        >> "$out/mpich.txt"
done
echo "# operation bytes ranks myriad_us mpich_us mpich/myriad"
awk 'NR == FNR { mpich[$1" "$2" "$3] = $4; next }
     { key = $1" "$2" "$3
       if (key in mpich) printf "%s %s %s %s %s %.1f\n", $1, $2, $3, $4, mpich[key], mpich[key] / ($4 > 0 ? $4 : 1e-9)
       else printf "%s %s %s %s - -\n", $1, $2, $3, $4 }' "$out/mpich.txt" "$out/myriad.txt"
