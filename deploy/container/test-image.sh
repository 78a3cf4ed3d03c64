#!/usr/bin/env bash
# Runs the CPU image under podman and checks that it serves (`make image-test`):
#
#   deploy/container/test-image.sh [TAG]     (default localhost/switchyard:latest)
#
#  1. builds the image first when it is missing (build-image.sh);
#  2. starts it with --network host on free loopback ports, the digits
#     models mounted read-only at /models, the image's own default config;
#  3. from the host: waits for /v2/health/ready, sends a V2 infer to a model
#     and to the cascade route and checks the answers, runs the image's
#     HEALTHCHECK, checks the process runs as uid 10001;
#  4. an invalid config mounted at /etc/switchyard: `check-config` (the
#     pods' init container) and `serve` both exit non-zero with the field
#     paths of the problems in their output;
#  5. the gateway pod of deploy/k8s/base under `podman kube play`
#     (kube-pod.py): it serves with the shipped ConfigMap; with an invalid
#     one its init container fails with the field path and the server
#     container never starts;
#  6. prints the image size.
# Exits non-zero on the first failed check. The container is stopped and
# removed by name on exit.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$CT_ROOT"

TAG="${1:-localhost/switchyard:latest}"
NAME="switchyard-image-test-$$"
WORK=$(mktemp -d /tmp/switchyard-image-test.XXXXXX)
cleanup() {
    podman rm -f -t 2 "$NAME" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { podman logs "$NAME" 2>&1 | tail -20 >&2 || true; die "FAIL: $*"; }

ct_setup_podman
ct_image_exists "$TAG" || deploy/container/build-image.sh cpu "$TAG"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port); ADMIN=$(free_port)

# The models folder may hold symlinks to files outside it: copy the two
# models the default config serves, readable by the image's user.
mkdir -p "$WORK/models" "$WORK/bad-config"
for m in digits-cheap digits-heavy; do
    [ -e "models/$m.onnx" ] || die "models/$m.onnx missing: run scripts/setup.sh first"
    cp -L "models/$m.onnx" "$WORK/models/"
done
chmod 755 "$WORK" "$WORK/models" "$WORK/bad-config"; chmod 644 "$WORK"/models/*

say "starting $TAG on 127.0.0.1:$PORT (admin $ADMIN)"
# Without systemd podman cannot schedule the health check's timer and says
# so on stderr; `podman healthcheck run` below runs the check itself.
# podman 4.3 also logs an error when it removes a finished init container.
quiet() { grep -v -e 'systemd connection' -e 'from database: no container' >&2 || true; }
podman run -d --name "$NAME" --network host -v "$WORK/models:/models:ro" \
    -e SWITCHYARD_HEALTH_PORT="$PORT" "$TAG" \
    serve --config /etc/switchyard/switchyard.toml \
    --listen "127.0.0.1:$PORT" --admin-listen "127.0.0.1:$ADMIN" >/dev/null 2> >(quiet)

start=$(date +%s.%N)
for _ in $(seq 1 300); do
    [ "$(podman inspect -f '{{.State.Running}}' "$NAME" 2>/dev/null)" = true ] || fail "container exited"
    curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null || fail "not ready after 30 s"
say "ready after $(python3 -c "print(f'{$(date +%s.%N) - $start:.2f}')") s (from podman run returning)"

# One digits image (64 pixels, 0..16) as a V2 JSON request.
BODY='{"inputs":[{"name":"X","shape":[1,64],"datatype":"FP32","data":[0,0,5,13,9,1,0,0,0,0,13,15,10,15,5,0,0,3,15,2,0,11,8,0,0,4,12,0,0,8,8,0,0,5,8,0,0,9,8,0,0,4,11,0,1,12,7,0,0,2,14,5,10,12,0,0,0,0,6,13,10,0,0,0]}]}'
for target in digits-cheap digits; do
    out=$(curl -s -w '\n%{http_code}' -H 'content-type: application/json' -d "$BODY" \
        "http://127.0.0.1:$PORT/v2/models/$target/infer") || fail "infer on $target: no answer"
    code=${out##*$'\n'}; json=${out%$'\n'*}
    [ "$code" = 200 ] || fail "infer on $target: HTTP $code: $json"
    label=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print([o for o in d["outputs"] if o["name"]=="label"][0]["data"][0])' "$json") \
        || fail "infer on $target: no label output in $json"
    [ "$label" = 0 ] || fail "infer on $target: label $label, expected 0 (the image is a zero)"
    say "V2 infer on $target from the host: HTTP 200, label $label"
done

# The image's own HEALTHCHECK (kept by the docker format), run by podman.
podman healthcheck run "$NAME" 2> >(quiet) || fail "the image's HEALTHCHECK fails on a ready server"
uid=$(podman exec "$NAME" sh -c 'cat /proc/1/status' | awk '/^Uid:/ {print $2}')
[ "$uid" = 10001 ] || fail "switchyard runs as uid $uid, expected 10001"
say "health check passes; switchyard runs as uid $uid"
# The console's page and its chart library are in the binary.
charts=$(curl -sf "http://127.0.0.1:$ADMIN/console/uplot.js" | wc -c) || fail "no console on the admin listener"
[ "$charts" -gt 10000 ] || fail "the console has no chart library ($charts bytes): gateway/console/node_modules missing from the build"
say "console served on the admin listener, chart library embedded ($charts bytes)"
podman rm -f -t 5 "$NAME" >/dev/null 2> >(quiet)

# An invalid ConfigMap: a route naming no model, a threshold out of range.
sed -e 's/threshold = 0.8/threshold = 1.8/' \
    -e 's/models = \["digits-cheap", "digits-heavy"\]/models = ["digits-cheap", "digits-nope"]/' \
    deploy/container/switchyard.toml > "$WORK/bad-config/switchyard.toml"
chmod 644 "$WORK/bad-config/switchyard.toml"
for cmd in "check-config /etc/switchyard/switchyard.toml" "serve --config /etc/switchyard/switchyard.toml --listen 127.0.0.1:$PORT --admin-listen 127.0.0.1:$ADMIN"; do
    set +e
    # shellcheck disable=SC2086
    log=$(timeout 60 podman run --rm --no-healthcheck --network host -v "$WORK/models:/models:ro" \
        -v "$WORK/bad-config:/etc/switchyard:ro" "$TAG" $cmd 2>&1)
    rc=$?
    set -e
    [ "$rc" != 0 ] && [ "$rc" != 124 ] || die "FAIL: '${cmd%% *}' on an invalid config: exit $rc: $log"
    for path in "routes[0].models[1]" "routes[0].policy.threshold"; do
        grep -qF "$path" <<<"$log" || die "FAIL: '${cmd%% *}' log lacks $path: $log"
    done
    say "invalid config: '${cmd%% *}' exits $rc naming routes[0].models[1] and routes[0].policy.threshold"
done

# The gateway pod of deploy/k8s/base under `podman kube play` (kube-pod.py
# says what it changes for a single host): with the shipped ConfigMap the
# init container passes and the gateway answers; with an invalid one the
# init container exits 1 with the field path in its log and the server
# container never starts.
PY="$CT_ROOT/.venv/bin/python"; [ -x "$PY" ] || PY=python3
KEY=$(awk '/SWITCHYARD_KEY_TEAM_A:/ {print $2}' deploy/k8s/base/secret.yaml)
POD=switchyard-gateway
pod_down() { podman kube down "$1" >/dev/null 2>&1 || true; }
"$PY" deploy/container/kube-pod.py "$WORK/pod.yaml" "$WORK/models" "$PORT" "$ADMIN" "$TAG"
trap 'pod_down "$WORK/pod.yaml"; cleanup' EXIT
podman kube play --network host "$WORK/pod.yaml" >/dev/null 2> >(quiet) || die "FAIL: kube play of the gateway pod"
for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null 2>&1 && break
    sleep 0.1
done
code=$(curl -s -o "$WORK/pod-infer.json" -w '%{http_code}' -H 'content-type: application/json' \
    -H "authorization: Bearer $KEY" -d "$BODY" "http://127.0.0.1:$PORT/v2/models/digits/infer")
[ "$code" = 200 ] || { podman logs "$POD-switchyard" 2>&1 | tail -20 >&2; die "FAIL: pod: infer on digits: HTTP $code $(cat "$WORK/pod-infer.json")"; }
# podman starts the server container only after the init container passed.
say "pod (kube play of base/gateway-deployment.yaml): init check-config passed, V2 infer on route digits: HTTP 200"
pod_down "$WORK/pod.yaml"

"$PY" deploy/container/kube-pod.py "$WORK/pod-bad.yaml" "$WORK/models" "$PORT" "$ADMIN" "$TAG" broken
trap 'pod_down "$WORK/pod-bad.yaml"; cleanup' EXIT
if podman kube play --network host "$WORK/pod-bad.yaml" >/dev/null 2>&1; then
    die "FAIL: pod with an invalid ConfigMap came up"
fi
log=$(podman logs "$POD-check-config" 2>&1)
grep -qF "routes[0].policy.threshold: must be between 0 and 1" <<<"$log" \
    || die "FAIL: pod: the init container's log lacks the field path: $log"
state=$(podman inspect -f '{{.State.Status}}' "$POD-switchyard")
[ "$state" = created ] || die "FAIL: pod: the server container is '$state', expected never started"
curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null 2>&1 && die "FAIL: pod with an invalid ConfigMap is ready"
say "pod with an invalid ConfigMap: init check-config fails ('routes[0].policy.threshold: must be between 0 and 1'), server never started, not ready"
pod_down "$WORK/pod-bad.yaml"
trap cleanup EXIT

size=$(podman image inspect --format '{{.Size}}' "$TAG")
say "image $TAG: $(( size / 1000000 )) MB ($size bytes)"
say "PASS"
