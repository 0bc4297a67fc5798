#!/usr/bin/env bash
# Start or stop the Docker daemon the kind provider uses, as a service this project
# manages (no systemd needed): Debian's dockerd with its own containerd, a pidfile
# and a log under /run/gpushare-docker and /var/log/gpushare-conformance.
#
# Usage: ci/docker-service.sh start|stop|status
#   start   start dockerd unless a daemon already answers on /var/run/docker.sock
#           (one we did not start is used as it is and never stopped by us)
#   stop    stop the dockerd we started, remove its bridges and iptables chains, and
#           report anything left behind (exit 1 when something is)
#   status  print "running (ours, pid N)", "running (not ours)" or "stopped"
#
# Docker sets the FORWARD policy to DROP when it enables IP forwarding; the local
# cluster's pods talk over a Linux bridge whose traffic passes FORWARD
# (bridge-nf-call-iptables), so start puts back the policy that was there before.
set -euo pipefail

RUN="${GPUSHARE_DOCKER_RUN:-/run/gpushare-docker}"
DATA_ROOT="${GPUSHARE_DOCKER_DATA_ROOT:-/var/lib/docker}"
LOG_DIR="${GPUSHARE_LOG_DIR:-/var/log/gpushare-conformance}"
PIDFILE="$RUN/dockerd.pid"
SOCKET=/var/run/docker.sock
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "[docker-service] $*" >&2; }
die() { log "error: $*"; exit 1; }

answers() { timeout 10 docker -H "unix://$SOCKET" info >/dev/null 2>&1; }
our_pid() {
  [[ -f "$PIDFILE" ]] || return 1
  local pid; pid=$(cat "$PIDFILE")
  [[ -n "$pid" && -d "/proc/$pid" ]] && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == dockerd ]] || return 1
  echo "$pid"
}

start() {
  if pid=$(our_pid); then
    answers || die "dockerd (pid $pid) is running but does not answer on $SOCKET; see $LOG_DIR/dockerd.log"
    log "already running (pid $pid)"; return 0
  fi
  if answers; then log "a Docker daemon we did not start answers on $SOCKET; using it"; return 0; fi
  [[ $(id -u) -eq 0 ]] || die "starting dockerd needs root"
  command -v dockerd >/dev/null || die "dockerd not found: install Debian's docker.io (bash ci/install-host-deps.sh)"
  command -v docker >/dev/null || die "the docker CLI not found: install Debian's docker.io (bash ci/install-host-deps.sh)"
  mkdir -p "$RUN" "$LOG_DIR"
  local policy
  policy=$(iptables -w -S FORWARD 2>/dev/null | awk '$1=="-P"{print $3}')
  # runc through our wrapper: kind's --privileged node containers ask for every
  # capability, and runc fails on those missing from this host's bounding set.
  install -m 0755 "$HERE/kind/gpushare-runc" "$RUN/gpushare-runc"
  log "starting dockerd (log $LOG_DIR/dockerd.log)"
  # setsid: the daemon outlives this script and a Ctrl-C of its caller.
  setsid dockerd --pidfile "$PIDFILE" --exec-root "$RUN/exec" --data-root "$DATA_ROOT" \
    --host "unix://$SOCKET" --log-level warn \
    --add-runtime "gpushare-runc=$RUN/gpushare-runc" --default-runtime gpushare-runc \
    </dev/null >>"$LOG_DIR/dockerd.log" 2>&1 &
  local started=$! i
  for i in $(seq 1 120); do
    if answers; then break; fi
    kill -0 "$started" 2>/dev/null || { tail -n 20 "$LOG_DIR/dockerd.log" >&2; die "dockerd exited during start"; }
    sleep 0.5
  done
  answers || { tail -n 20 "$LOG_DIR/dockerd.log" >&2; die "dockerd did not answer on $SOCKET within 60 s"; }
  if [[ -n "$policy" ]] && [[ "$(iptables -w -S FORWARD | awk '$1=="-P"{print $3}')" != "$policy" ]]; then
    iptables -w -P FORWARD "$policy"
    log "FORWARD policy put back to $policy"
  fi
  log "running (pid $(cat "$PIDFILE"))"
}

# Drop Docker's chains and every rule that jumps to them, table by table.
remove_docker_iptables() {
  local table saved kept
  for table in filter nat; do
    saved=$(iptables-save -t "$table" 2>/dev/null) || continue
    grep -q 'DOCKER' <<<"$saved" || continue
    kept=$(grep -vE '^:DOCKER|DOCKER' <<<"$saved")
    iptables-restore -w -T "$table" <<<"$kept" || log "warning: could not remove Docker's rules from table $table"
  done
}

stop() {
  local pid
  if ! pid=$(our_pid); then
    if answers; then log "the Docker daemon on $SOCKET was not started by us; leaving it running"; return 0; fi
    log "not running"
  else
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid"
    local i
    for i in $(seq 1 60); do [[ -d /proc/$pid ]] || break; sleep 0.5; done
    if [[ -d /proc/$pid ]]; then log "dockerd did not stop in 30 s; killing it"; kill -KILL "$pid" || true; sleep 1; fi
  fi
  # What dockerd leaves by design: its bridges and iptables chains.
  local link
  for link in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | grep -E '^(docker0|br-[0-9a-f]{12})$' || true); do
    ip link delete "$link" || log "warning: could not delete bridge $link"
  done
  remove_docker_iptables
  rm -f "$PIDFILE" "$SOCKET"
  # Report anything that is still there.
  local left=()
  pgrep -x dockerd >/dev/null && left+=("process dockerd (pid $(pgrep -x dockerd | tr '\n' ' '))")
  pgrep -f "containerd --config $RUN/exec" >/dev/null && left+=("docker's containerd")
  grep -qE " ($DATA_ROOT|$RUN)/" /proc/self/mountinfo && left+=("mounts: $(awk -v a="$DATA_ROOT/" -v b="$RUN/" 'index($5,a)==1||index($5,b)==1{print $5}' /proc/self/mountinfo | tr '\n' ' ')")
  ip -o link show type bridge 2>/dev/null | grep -qE ': (docker0|br-[0-9a-f]{12}):' && left+=("bridges")
  iptables-save 2>/dev/null | grep -q DOCKER && left+=("iptables rules naming DOCKER")
  if [[ ${#left[@]} -gt 0 ]]; then
    log "left behind: ${left[*]}"; return 1
  fi
  rm -rf "$RUN"
  log "stopped; nothing left behind (images stay in $DATA_ROOT)"
}

status() {
  local pid
  if pid=$(our_pid); then echo "running (ours, pid $pid)"
  elif answers; then echo "running (not ours)"
  else echo "stopped"; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
