#!/bin/bash
# Two emulated hosts (network namespaces joined by a veth pair, 10.99.0.1 and 10.99.0.2, each
# with its own UTS hostname), 2 processes each, launched by Hydra over an ssh stand-in that
# enters the right namespace: ../shared/reference/launchers.md §5, Hydra stage (Slurm stage
# with WITH_SLURM=1 is not wired up yet). Needs root, iproute2, util-linux and MPICH.
#
# Usage: .ci/multihost.sh PROG [ARGS...]   (PROG runs as 4 processes; exit status is mpiexec's)
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
W=$(mktemp -d /tmp/ci-multihost.XXXXXX)
cleanup() {
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
t0=$(date +%s.%N)
setsid timeout -s KILL 120 "$W/onhost" "$A" mpiexec.hydra \
    -launcher ssh -launcher-exec "$W/nsrsh" -hosts 10.99.0.1:2,10.99.0.2:2 -n 4 "${PROG[@]}"
rc=$?
echo "multihost: hydra 2x2: rc=$rc in $(echo "$(date +%s.%N)-$t0" | bc)s"
exit $rc
