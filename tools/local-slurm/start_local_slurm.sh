#!/usr/bin/env bash
# start_local_slurm.sh - install, configure and start a real single-node SLURM cluster
# (Debian 12: slurm-wlm 22.05, munge 0.5.15) that listens on loopback only, without
# systemd, and wait until `sinfo` reports the node idle.  Must run as root.
# The project's CI (.ci/slurm_check.sh) runs the workflow's SLURM profiles on it; see README.md.
#
# Idempotent: packages are installed only if missing, config files are rewritten only
# if their content changes, and daemons are (re)started only if they are not running or
# their config changed.  A second run on a healthy cluster is a ~1 s no-op.
#
# Environment knobs:
#   SLURM_ACCOUNTING=1     1: slurmdbd + a private MariaDB (127.0.0.1:$SLURM_DB_PORT, datadir
#                          /var/lib/local-slurm/mysql) so that sacct/sacctmgr work (default).
#                          0: no accounting; then use `snakemake --slurm-status-command squeue`.
#   SLURM_DB_PORT=3307     loopback port of that private MariaDB.
#   SLURM_FAKE_GPUS=0      advertise N fake gres/gpu devices (char devices aliasing
#                          /dev/null), so that `--gpus=1` / snakemake `gpu=1` jobs run
#                          (with CUDA_VISIBLE_DEVICES set) instead of being rejected.
#   SLURM_PARTITION=debug  name of the (default) partition.
#   SLURM_REAL_MEMORY_MB   RealMemory of the node; default 90% of physical memory.
#   SLURM_WAIT_S=60        how long to wait for each daemon.
# Stop with stop_local_slurm.sh (add --purge to also remove the packages).
set -euo pipefail

ACCT=${SLURM_ACCOUNTING:-1}
FAKE_GPUS=${SLURM_FAKE_GPUS:-0}
PARTITION=${SLURM_PARTITION:-debug}
WAIT_S=${SLURM_WAIT_S:-60}
DB_PORT=${SLURM_DB_PORT:-3307}
CLUSTER=localci
STATE=/var/lib/local-slurm          # our bookkeeping + MariaDB datadir
LOGDIR=/var/log/slurm

[ "$(id -u)" = 0 ] || { echo "start_local_slurm.sh must run as root" >&2; exit 1; }

say() { printf '[start_local_slurm %s] %s\n' "$(date +%T)" "$*" >&2; }
die() {
  say "ERROR: $*"
  for f in "$LOGDIR"/*.log "$STATE"/mariadb.log; do
    [ -f "$f" ] && { echo "==== tail $f"; tail -n 25 "$f"; } >&2
  done
  exit 1
}

# shellcheck source=pidfiles.sh
source "$(dirname "$0")/pidfiles.sh"   # alive, stop_pidfile

wait_for() {  # wait_for DESCRIPTION COMMAND...
  local desc=$1 i
  shift
  for ((i = 0; i < WAIT_S * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "timed out after ${WAIT_S}s waiting for $desc"
}

# write_if_changed FILE MODE: stdin -> FILE; returns 0 if the content changed.
write_if_changed() {
  local f=$1 mode=$2 tmp
  tmp=$(mktemp)
  cat > "$tmp"
  if [ -f "$f" ] && cmp -s "$tmp" "$f"; then
    rm -f "$tmp"
    return 1
  fi
  install -m "$mode" "$tmp" "$f"
  rm -f "$tmp"
  say "wrote $f"
  return 0
}

installed_pkgs() { dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' 2>/dev/null | awk '$1=="ii"{print $2}' | sort; }

# ---------------------------------------------------------------- 1. packages
PKGS=(munge slurm-client slurmctld slurmd)
[ "$ACCT" = 1 ] && PKGS+=(slurmdbd mariadb-server-core mariadb-client-core)
missing=()
for p in "${PKGS[@]}"; do
  [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)" = "ii " ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing: ${missing[*]}"
  mkdir -p "$STATE"
  before=$(mktemp)
  installed_pkgs > "$before"
  # Keep maintainer scripts from trying to start services (there is no systemd here).
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    added_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  # (capture first: `apt-cache ... | grep -q` fails under pipefail when grep exits early)
  policy=$(apt-cache policy slurmctld 2>/dev/null || true)
  updated=0
  if ! grep -q 'Candidate: [0-9]' <<< "$policy"; then
    # Keep the English description index (Translation-en) that the claim check reads: a plain
    # update under Debian images' Acquire::Languages "none" deletes it.
    apt-get -o Acquire::Languages=en update -q > "$STATE/apt-update.log" 2>&1 || { tail -n 20 "$STATE/apt-update.log" >&2; die "apt-get update failed"; }
    updated=1
  fi
  apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
      > "$STATE/apt-install.log" 2>&1
  }
  # Package lists older than the mirror give 404s on download: refresh them once and retry.
  if ! apt_install; then
    retried=0
    if [ "$updated" = 0 ]; then
      say "apt-get install failed; refreshing the package lists and retrying"
      apt-get -o Acquire::Languages=en update -q > "$STATE/apt-update.log" 2>&1 && apt_install && retried=1
    fi
    [ "$retried" = 1 ] || { tail -n 30 "$STATE/apt-install.log" >&2; die "apt-get install failed"; }
  fi
  if [ "$added_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
  installed_pkgs | comm -13 "$before" - >> "$STATE/installed-packages.txt"
  rm -f "$before"
fi

# ---------------------------------------------------------------- 2. munge
if [ ! -s /etc/munge/munge.key ]; then
  say "creating munge key"
  mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0600 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
if ! alive /run/munge/munged.pid munged; then
  say "starting munged"
  runuser -u munge -- /usr/sbin/munged --force
fi
wait_for munged sh -c 'munge -n | unmunge'

# ---------------------------------------------------------------- 3. config
HOST=$(hostname -s)
HW=$(slurmd -C | head -n 1)   # NodeName=.. CPUs=.. Boards=.. SocketsPerBoard=.. CoresPerSocket=.. ThreadsPerCore=.. RealMemory=..
hw() { tr ' ' '\n' <<< "$HW" | sed -n "s/^$1=//p"; }
TOTAL_MB=$(hw RealMemory)
MEM_MB=${SLURM_REAL_MEMORY_MB:-$((TOTAL_MB * 9 / 10 / 256 * 256))}
NODE_TOPO="CPUs=$(hw CPUs) Boards=$(hw Boards) SocketsPerBoard=$(hw SocketsPerBoard) CoresPerSocket=$(hw CoresPerSocket) ThreadsPerCore=$(hw ThreadsPerCore)"

if [ "$ACCT" = 1 ]; then
  ACCT_CONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/linux"
else
  ACCT_CONF="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none"
fi
GRES_NODE=""
GRES_TYPES=""
if [ "$FAKE_GPUS" -gt 0 ]; then
  GRES_NODE=" Gres=gpu:$FAKE_GPUS"
  GRES_TYPES="GresTypes=gpu"
  [ "$ACCT" = 1 ] && GRES_TYPES="$GRES_TYPES
AccountingStorageTRES=gres/gpu"
  install -d -m 0755 /run/slurm-fakegpu
  for ((i = 0; i < FAKE_GPUS; i++)); do
    [ -c /run/slurm-fakegpu/gpu$i ] || mknod -m 0666 /run/slurm-fakegpu/gpu$i c 1 3   # = /dev/null
  done
fi

# Bind the daemons to loopback instead of 0.0.0.0.  Slurm's NoInAddrAny/NoCtldInAddrAny
# bind to whatever gethostname() resolves to, so only use them if that is a loopback
# address (Debian images map the hostname to 127.0.0.1/127.0.1.1 in /etc/hosts).
HOSTADDR=$(getent ahostsv4 "$(hostname)" | awk 'NR==1{print $1}' || true)
case "$HOSTADDR" in
  127.*) COMM_CTLD="CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
         COMM_DBD="CommunicationParameters=NoInAddrAny" ;;
  *)     COMM_CTLD=""; COMM_DBD=""
         say "WARNING: hostname $(hostname) resolves to '$HOSTADDR', not loopback: daemons will" \
             "listen on all interfaces (all traffic still goes to 127.0.0.1)" ;;
esac

install -d -m 0755 /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGDIR" "$STATE"
CONF_CHANGED=0
write_if_changed /etc/slurm/slurm.conf 0644 <<EOF && CONF_CHANGED=1
# generated by start_local_slurm.sh: single node, loopback only, no cgroups, no systemd
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
MailProg=/bin/true
$COMM_CTLD
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
MinJobAge=300
$ACCT_CONF
JobCompType=jobcomp/none
$GRES_TYPES
NodeName=$HOST NodeAddr=127.0.0.1 $NODE_TOPO RealMemory=$MEM_MB$GRES_NODE State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
if [ "$FAKE_GPUS" -gt 0 ]; then
  write_if_changed /etc/slurm/gres.conf 0644 <<EOF && CONF_CHANGED=1
AutoDetect=off
NodeName=$HOST Name=gpu File=/run/slurm-fakegpu/gpu[0-$((FAKE_GPUS - 1))]
EOF
elif [ -e /etc/slurm/gres.conf ]; then
  rm -f /etc/slurm/gres.conf
  CONF_CHANGED=1
fi

# ---------------------------------------------------------------- 4. accounting (optional)
if [ "$ACCT" = 1 ]; then
  # A private MariaDB instance: own datadir, socket, pid file and loopback port, so it
  # cannot collide with a system MariaDB/MySQL (/run/mysqld, port 3306).
  DATADIR=$STATE/mysql
  SOCK=$STATE/mysqld.sock
  if [ ! -d "$DATADIR/mysql" ]; then
    say "initialising MariaDB datadir $DATADIR"
    rm -rf "$DATADIR"
    mariadb-install-db --no-defaults --user=root --datadir="$DATADIR" \
      --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve \
      > "$STATE/mariadb-install-db.log" 2>&1 || die "mariadb-install-db failed (see $STATE/mariadb-install-db.log)"
  fi
  if ! alive "$STATE/mysqld.pid" mariadbd; then
    say "starting mariadbd (127.0.0.1:$DB_PORT)"
    setsid -f /usr/sbin/mariadbd --no-defaults --user=root --datadir="$DATADIR" \
      --socket="$SOCK" --pid-file="$STATE/mysqld.pid" --bind-address=127.0.0.1 \
      --port="$DB_PORT" --skip-name-resolve --innodb-buffer-pool-size=64M \
      --innodb-lock-wait-timeout=900 --log-error="$STATE/mariadb.log" \
      < /dev/null > /dev/null 2>&1
  fi
  wait_for mariadbd mariadb --no-defaults --socket="$SOCK" -uroot -e 'select 1'
  mariadb --no-defaults --socket="$SOCK" -uroot -e "
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

  DBD_CHANGED=0
  write_if_changed /etc/slurm/slurmdbd.conf 0600 <<EOF && DBD_CHANGED=1
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
LogFile=$LOGDIR/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
$COMM_DBD
EOF
  [ "$DBD_CHANGED" = 1 ] && stop_pidfile /run/slurmdbd.pid slurmdbd
  if ! alive /run/slurmdbd.pid slurmdbd; then
    say "starting slurmdbd"
    /usr/sbin/slurmdbd
  fi
  wait_for slurmdbd sacctmgr -n show cluster
  clusters=$(sacctmgr -n -P show cluster format=cluster)
  if ! grep -qx "$CLUSTER" <<< "$clusters"; then
    sacctmgr -i add cluster "$CLUSTER" > /dev/null
  fi
else
  stop_pidfile /run/slurmdbd.pid slurmdbd
  stop_pidfile "$STATE/mysqld.pid" mariadbd
fi

# ---------------------------------------------------------------- 5. slurmctld + slurmd
if [ "$CONF_CHANGED" = 1 ]; then
  stop_pidfile /run/slurmd.pid slurmd
  stop_pidfile /run/slurmctld.pid slurmctld
fi
if ! alive /run/slurmctld.pid slurmctld; then
  say "starting slurmctld"
  /usr/sbin/slurmctld
fi
wait_for slurmctld sh -c 'scontrol ping | grep -q "is UP"'
if ! alive /run/slurmd.pid slurmd; then
  say "starting slurmd"
  /usr/sbin/slurmd
fi

# ---------------------------------------------------------------- 6. wait for the node
resumed=0
for ((i = 0; i < WAIT_S * 5; i++)); do
  st=$(sinfo -h -n "$HOST" -o %T 2>/dev/null || true)
  case "$st" in
    idle|mixed|allocated|completing) break ;;
    *drain*|*down*|*inval*|*fail*)
      # e.g. DOWN/DRAIN remembered from a previous run with another config
      if [ "$resumed" = 0 ] && [ "$i" -ge 10 ]; then
        say "node is '$st' ($(sinfo -h -n "$HOST" -o %E)); resuming it"
        scontrol update nodename="$HOST" state=resume || true
        resumed=1
      fi ;;
  esac
  sleep 0.2
done
case "$st" in
  idle|mixed|allocated|completing) ;;
  *) die "node $HOST is '$st' after ${WAIT_S}s: $(sinfo -h -n "$HOST" -o %E)" ;;
esac
say "SLURM is up: $(sinfo -h -o '%P %a %D %T %c cpus %m MB %G')"
