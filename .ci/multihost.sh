#!/bin/bash
# Two emulated hosts (network namespaces joined by a veth pair, 10.99.0.1 and 10.99.0.2, each
# with its own UTS hostname), 2 processes each, launched by Hydra over an ssh stand-in that
# enters the right namespace: ../shared/reference/launchers.md §5, Hydra stage; with
# WITH_SLURM=1 also a 2-node Slurm (slurmctld + one slurmd per host) and `srun -N2 -n4`.
# Needs root, iproute2, util-linux and MPICH.
#
# Usage: .ci/multihost.sh PROG [ARGS...]   (PROG runs as 4 processes; exit status is the last
#        launcher's)
#   WITH_SLURM=1     also run PROG under srun
#   SRUN_MPI="pmi2"  srun's --mpi plugins, one run each (e.g. "pmi2 pmix": pmix needs PROG built
#                    with the pmix feature)
#   HYDRA=0          skip the Hydra run (Slurm only)
# Prints "skipped: ..." and exits 0 where root or `ip netns` is missing.
set -u
if [ "$(id -u)" -ne 0 ] || ! ip netns list >/dev/null 2>&1 || ! command -v nsenter >/dev/null \
    || ! command -v mpiexec.hydra >/dev/null; then
    echo "multihost: skipped: needs root, ip netns, nsenter and mpiexec.hydra"
    exit 0
fi
PROG=("$@")
# Names unique to this run: parallel CI jobs on one machine do not collide.
A="myrA$$"; B="myrB$$"
W=$(mktemp -d /tmp/ci-multihost.XXXXXX); PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    ip netns del "$A" 2>/dev/null; ip netns del "$B" 2>/dev/null; rm -rf "$W"
}
trap cleanup EXIT
ip netns add "$A" && ip netns add "$B" || exit 1
ip link add "v$A" netns "$A" type veth peer name "v$B" netns "$B" || exit 1
ip -n "$A" addr add 10.99.0.1/24 dev "v$A"
ip -n "$B" addr add 10.99.0.2/24 dev "v$B"
for h in "$A" "$B"; do ip -n "$h" link set lo up; done
ip -n "$A" link set "v$A" up; ip -n "$B" link set "v$B" up
# onhost H CMD...: run CMD "on" emulated host H (its netns and its own UTS hostname);
# nsenter keeps /sys/fs/cgroup visible (ip netns exec remounts /sys).
cat > "$W/onhost" <<'EOS'
#!/bin/sh
h=$1; shift
exec nsenter --net=/run/netns/$h unshare --uts sh -c 'hostname "$0"; exec "$@"' "$h" "$@"
EOS
# ssh stand-in for Hydra: nsrsh [-x ...] HOST CMDSTRING
cat > "$W/nsrsh" <<EOS
#!/bin/bash
while [[ "\$1" == -* ]]; do shift; done
case "\$1" in 10.99.0.1) h=$A;; 10.99.0.2) h=$B;; *) echo "nsrsh: unknown host \$1" >&2; exit 255;; esac
shift
exec $W/onhost "\$h" /bin/sh -c "\$*"
EOS
chmod +x "$W/onhost" "$W/nsrsh"
if [ "${HYDRA:-1}" != 0 ]; then
    t0=$(date +%s.%N)
    setsid timeout -s KILL 120 "$W/onhost" "$A" mpiexec.hydra \
        -launcher ssh -launcher-exec "$W/nsrsh" -hosts 10.99.0.1:2,10.99.0.2:2 -n 4 "${PROG[@]}"
    rc=$?
    echo "multihost: hydra 2x2: rc=$rc in $(echo "$(date +%s.%N)-$t0" | bc)s"
    [ $rc -eq 0 ] || exit $rc
fi
[ "${WITH_SLURM:-0}" = 1 ] || exit 0
if ! command -v slurmctld >/dev/null; then
    echo "multihost: slurm stage skipped: no slurmctld (apt-get install slurm-wlm)"
    exit 0
fi
mkdir -p "$W/slurm"/{state,log,spool_$A,spool_$B,conf_$A,conf_$B}
for n in "$A" "$B"; do
    cat > "$W/slurm/conf_$n/slurm.conf" <<EOS
ClusterName=ci
SlurmctldHost=$A(10.99.0.1)
SlurmUser=root
AuthType=auth/none
CredType=cred/none
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=$W/slurm/state
SlurmdSpoolDir=$W/slurm/spool_%n
SlurmctldPidFile=$W/slurm/slurmctld.pid
SlurmdPidFile=$W/slurm/slurmd.%n.pid
SlurmctldLogFile=$W/slurm/log/slurmctld.log
SlurmdLogFile=$W/slurm/log/slurmd.%n.log
NodeName=$A NodeAddr=10.99.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000
NodeName=$B NodeAddr=10.99.0.2 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000
PartitionName=ci Nodes=$A,$B Default=YES MaxTime=INFINITE State=UP
EOS
    # srun --mpi=pmix: the hosts share /tmp, where each slurmstepd would create the same
    # per-step directory (EEXIST on the second host); give each host its own.
    mkdir -p "$W/slurm/pmix_$n"
    echo "PMIxCliTmpDirBase=$W/slurm/pmix_$n" > "$W/slurm/conf_$n/mpi.conf"
done
export SLURM_CONF=$W/slurm/conf_$A/slurm.conf
t0=$(date +%s.%N)
"$W/onhost" "$A" slurmctld -D -i > "$W/slurm/log/ctld.out" 2>&1 & PIDS+=($!)
"$W/onhost" "$A" slurmd -D -N "$A" > "$W/slurm/log/dA.out" 2>&1 & PIDS+=($!)
SLURM_CONF=$W/slurm/conf_$B/slurm.conf "$W/onhost" "$B" slurmd -D -N "$B" \
    > "$W/slurm/log/dB.out" 2>&1 & PIDS+=($!)
up=0
for i in $(seq 1 300); do
    [ "$("$W/onhost" "$A" sinfo -h -o '%t %D' 2>/dev/null)" = "idle 2" ] && { up=1; break; }
    sleep 0.1
done
echo "multihost: slurm 2 nodes up=$up after $(echo "$(date +%s.%N)-$t0" | bc)s"
[ $up = 1 ] || { tail -n 5 "$W"/slurm/log/*.out; exit 1; }
rc=0
for mpi in ${SRUN_MPI:-pmi2}; do
    t0=$(date +%s.%N)
    setsid timeout -s KILL 60 "$W/onhost" "$A" srun -N2 -n4 --mpi="$mpi" "${PROG[@]}"
    rc=$?
    echo "multihost: srun --mpi=$mpi 2x2: rc=$rc in $(echo "$(date +%s.%N)-$t0" | bc)s"
    [ $rc -eq 0 ] || { tail -n 20 "$W"/slurm/log/slurmd.*.log; exit $rc; }
done
exit $rc
