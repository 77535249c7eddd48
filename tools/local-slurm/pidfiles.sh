# pidfiles.sh - daemon bookkeeping shared by start_local_slurm.sh and stop_local_slurm.sh.
# Source it after defining say(). Daemons are found by their pid files only, never by name.

# alive PIDFILE COMM: the pid in PIDFILE is a live (non-zombie) process named COMM.
# (PID 1 on these machines reaps orphans lazily, so a killed daemon can linger as a zombie.)
alive() {
  local pid
  [ -s "$1" ] || return 1
  pid=$( { tr -dc 0-9 < "$1"; } 2>/dev/null ) || return 1   # the daemon may remove it meanwhile
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" != Z ]
}

# stop_pidfile PIDFILE COMM: SIGTERM, wait up to STOP_WAIT_S seconds (default 20), then SIGKILL.
stop_pidfile() {
  local pf=$1 comm=$2 wait_s=${STOP_WAIT_S:-20} pid i
  if ! alive "$pf" "$comm"; then
    rm -f "$pf"
    return 0
  fi
  pid=$( { tr -dc 0-9 < "$pf"; } 2>/dev/null ) || return 0
  say "stopping $comm (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < wait_s * 10; i++)); do
    alive "$pf" "$comm" || break
    sleep 0.1
  done
  if alive "$pf" "$comm"; then
    say "$comm (pid $pid) ignored SIGTERM for ${wait_s}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
  rm -f "$pf"
}
