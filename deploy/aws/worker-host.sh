#!/bin/bash
# warmpool-host: the GPU worker host's lifecycle agent (systemd warmpool-host.service, every boot).
# It runs `warmpool worker` (the container image, through /usr/local/bin/warmpool) and answers
# the Auto Scaling group's lifecycle hooks, so the group and the worker agree on when a host is
# ready and when it may go:
#
#   target state Warmed:*  (launched into the warm pool): pull the image, start the worker in
#       standby (downloads and sha256-checks the weights into the disk cache, loads, warms, takes
#       no job), stop it, complete the launch hook: the group then stops the instance, with the
#       image and the weights on its volume.
#   target state InService (launched directly, or leaving the warm pool): start the worker
#       (active), complete the launch hook once it is ready (warm-up finished) or has failed, then
#       watch: when the target becomes Terminated (scale-in) or Warmed:* (scale-in back into the
#       pool), stop the worker (SIGTERM = drain: no new jobs, held jobs finished) and complete the
#       drain hook. A worker that exits non-zero (its engine died) is restarted; one that exits 0
#       was drained by the scaler, which terminates the instance next.
#
# Settings come from /etc/warmpool/host.env (written by the launch template's user data):
# WARMPOOL_GROUP, WARMPOOL_MODEL, WARMPOOL_VERSION, WARMPOOL_IMAGE, LAUNCH_HOOK, DRAIN_HOOK,
# DRAIN_TIMEOUT_S, HEALTH_PORT, AWS_REGION. IMDS_URL, POLL_S and WARMPOOL_BIN exist for tests.
set -o pipefail

# No "$" + "{" anywhere in this file: it is embedded in a CloudFormation template.
HOST_ENV=$WARMPOOL_HOST_ENV
[ -n "$HOST_ENV" ] || HOST_ENV=/etc/warmpool/host.env
# shellcheck disable=SC1090
[ -r "$HOST_ENV" ] && . "$HOST_ENV"
[ -n "$IMDS_URL" ] || IMDS_URL=http://169.254.169.254
[ -n "$POLL_S" ] || POLL_S=5
[ -n "$WARMPOOL_BIN" ] || WARMPOOL_BIN=/usr/local/bin/warmpool
WORKER_PID=

log() { echo "warmpool-host: $*"; }

# IMDSv2 (the launch template requires tokens).
imds() {
  local token
  token=$(curl -sf -X PUT "$IMDS_URL/latest/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60') || return 1
  curl -sf -H "X-aws-ec2-metadata-token: $token" "$IMDS_URL/latest/meta-data/$1"
}

target_state() { imds autoscaling/target-lifecycle-state || echo unknown; }

complete_hook() {
  log "completing lifecycle hook $1 with $2"
  aws autoscaling complete-lifecycle-action --region "$AWS_REGION" --auto-scaling-group-name "$WARMPOOL_GROUP" \
    --lifecycle-hook-name "$1" --instance-id "$INSTANCE_ID" --lifecycle-action-result "$2" ||
    log "no pending $1 action (a reboot, or the hook timed out): nothing to complete"
}

pull_image() {
  docker image inspect "$WARMPOOL_IMAGE" >/dev/null 2>&1 && return 0
  local registry
  registry=$(echo "$WARMPOOL_IMAGE" | cut -d/ -f1)
  case $registry in
  *.amazonaws.com) aws ecr get-login-password --region "$AWS_REGION" | docker login --username AWS --password-stdin "$registry" ;;
  esac
  docker pull "$WARMPOOL_IMAGE"
}

start_worker() {
  log "starting the worker ($1)"
  WARMPOOL_START_AS=$1 "$WARMPOOL_BIN" worker --model "$WARMPOOL_MODEL" --version "$WARMPOOL_VERSION" &
  WORKER_PID=$!
}

worker_running() { [ -n "$WORKER_PID" ] && kill -0 "$WORKER_PID" 2>/dev/null; }

# Ready = warm-up finished (worker/health-server.ts); gives up when the worker exits first.
wait_ready() {
  until curl -sf "http://127.0.0.1:$HEALTH_PORT/ready" >/dev/null; do
    worker_running || return 1
    sleep 2
  done
}

# SIGTERM through docker: the worker drains, then exits; forced after DRAIN_TIMEOUT_S.
stop_worker() {
  worker_running || return 0
  log "draining the worker"
  docker stop --time "$DRAIN_TIMEOUT_S" warmpool-worker >/dev/null 2>&1 || kill -TERM "$WORKER_PID"
  wait "$WORKER_PID"
}

prepare_in_warm_pool() {
  pull_image || log "image pull failed; the instance will pull again when it enters service"
  start_worker standby
  wait_ready || log "the worker did not warm up in the warm pool; it will start cold"
  stop_worker
  complete_hook "$LAUNCH_HOOK" CONTINUE
}

serve() {
  pull_image || log "image pull failed"
  start_worker active
  wait_ready || log "the worker failed before it was ready; its heartbeat says why"
  complete_hook "$LAUNCH_HOOK" CONTINUE
  while true; do
    case $(target_state) in
    Terminated | Warmed:*)
      stop_worker
      complete_hook "$DRAIN_HOOK" CONTINUE
      return 0
      ;;
    esac
    if [ -n "$WORKER_PID" ] && ! worker_running; then
      wait "$WORKER_PID"
      code=$?
      WORKER_PID=
      if [ "$code" -ne 0 ]; then
        log "the worker exited with $code; restarting it"
        sleep "$POLL_S"
        start_worker active
      else
        log "the worker drained; waiting for the scaler to retire this instance"
      fi
    fi
    sleep "$POLL_S"
  done
}

main() {
  INSTANCE_ID=$(imds instance-id) || {
    log "no instance metadata"
    exit 1
  }
  trap 'stop_worker; exit 0' TERM INT
  case $(target_state) in
  Warmed:*) prepare_in_warm_pool ;;
  *) serve ;;
  esac
}

main "$@"
