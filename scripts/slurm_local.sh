#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for the tests of launch.executor=slurm (tests/slurm_helpers.py):
# Debian's slurm-wlm and munge (about 2 minutes to install the first time), a minimal slurm.conf, and the three
# daemons (munged, slurmctld, slurmd). Safe to rerun; when the cluster answers already it returns at once.
#
# It needs root and apt-get. Without them it says so and exits 0: the SLURM tests then skip, naming the reason.
# An /etc/slurm/slurm.conf that this script did not write (a real cluster's) is left alone.
set -euo pipefail
say() { echo "slurm_local.sh: $*"; }
MARK="# written by rescue-train scripts/slurm_local.sh"
CONF=/etc/slurm/slurm.conf

if command -v sinfo >/dev/null 2>&1 && timeout 10 sinfo -h -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; then
  exit 0  # up already
fi
if [ "$(id -u)" != 0 ]; then
  say "not root: no local SLURM cluster started (the SLURM tests skip)"; exit 0
fi
if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get to install slurm-wlm and munge: no local SLURM cluster (the SLURM tests skip)"; exit 0
  fi
  say "installing slurm-wlm and munge (about 2 minutes)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q slurm-wlm munge >/dev/null 2>&1 || { apt-get update -q >/dev/null; apt-get install -y -q slurm-wlm munge >/dev/null; }
fi

host=$(hostname -s)
cpus=$(nproc)
memory=$(awk '/^MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)  # MB; above the real memory the node drains
if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
  say "$CONF was not written by this script: using it as it is"
else
  mkdir -p /etc/slurm
  cat > "$CONF" <<EOF
$MARK
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
fi
mkdir -p /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge && chown munge:munge /run/munge
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
running /run/munge/munged.pid || su -s /bin/sh munge -c /usr/sbin/munged
running /run/slurmctld.pid || /usr/sbin/slurmctld
running /run/slurmd.pid || /usr/sbin/slurmd
for _ in $(seq 60); do
  state=$(timeout 10 sinfo -h -n "$host" -o '%t' 2>/dev/null | head -1 || true)
  case "$state" in
    idle|mix|alloc) say "node $host is $state ($cpus CPUs, partition debug)"; exit 0 ;;
    down*|drain*|drng*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 1
done
say "the cluster did not come up within a minute (sinfo says '${state:-nothing}'); see /var/log/slurm/" >&2
exit 1
