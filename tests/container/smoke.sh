#!/usr/bin/env bash
# smoke.sh - builds the attnd image and checks it for real: start on a free loopback port, wait
# for /healthz, POST a job and check its numbers, GET /, check the process is not root, SIGTERM
# and check a clean exit; then a rolling update with the Deployment's settings, where a client
# sending jobs all along must see no 503 while the old pod stops (rollout.py); then remove
# everything it made. Run as root (make container-test).
#
# There is no Docker engine here: buildah builds and podman (with runc) runs. The Debian base
# images are made locally with debootstrap from the mirror apt already uses, once, and reused.
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE=localhost/attnd:smoke
NAME=attnd-smoke-$$
BASE_SLIM=docker.io/library/debian:bookworm-slim
BASE_FULL=docker.io/library/debian:bookworm
work=$(mktemp -d)
started=""

log() { printf 'smoke: %s\n' "$*"; }
fail() { printf 'smoke: FAIL: %s\n' "$*" >&2; exit 1; }
pods_started=""
cleanup() {
    if [ -n "$started" ]; then podman --runtime runc rm -f -t 0 "$NAME" >/dev/null 2>&1 || true; fi
    if [ -n "$pods_started" ]; then
        podman --runtime runc rm -f -t 0 "$NAME-old" "$NAME-new" >/dev/null 2>&1 || true
    fi
    podman rmi -f "$IMAGE" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

for tool in buildah podman runc debootstrap curl; do
    command -v "$tool" >/dev/null || fail "$tool is missing (apt-get install -y buildah podman runc debootstrap curl)"
done

# 1. The base images, made once.
if ! podman image exists "$BASE_SLIM"; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    log "making the base image with debootstrap from $mirror (about a minute)"
    rootfs="$work/rootfs"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
        { tail -20 "$work/debootstrap.log"; fail "debootstrap failed"; }
    mkdir -p "$rootfs/etc/apt/sources.list.d"
    cp /etc/apt/sources.list.d/*.sources "$rootfs/etc/apt/sources.list.d/" 2>/dev/null || true
    rm -f "$rootfs/etc/apt/sources.list"
    # Slim it the way debian:bookworm-slim is: no downloaded packages or lists, and dpkg told to
    # skip documentation, manuals and translations in everything installed later.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
CFG
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    tar --numeric-owner -C "$rootfs" -c . | podman import - "$BASE_SLIM" >/dev/null
    rm -rf "$rootfs"
fi
podman image exists "$BASE_FULL" || podman tag "$BASE_SLIM" "$BASE_FULL"

# 2. Build.
log "building $IMAGE"
buildah bud --runtime runc --pull-never --network host -t "$IMAGE" . >"$work/build.log" 2>&1 ||
    { tail -30 "$work/build.log"; fail "the image does not build"; }
size=$(podman image inspect "$IMAGE" --format '{{.Size}}')
log "image size: $((size / 1000000)) MB"

# 3. Start on a free loopback port (host network: the port is chosen here).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
podman --runtime runc run -d --name "$NAME" --network host \
    --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
    -e ATTND_LISTEN="127.0.0.1:$port" "$IMAGE" >/dev/null
started=1
base="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
    curl -fsS "$base/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "$base/healthz" >/dev/null || { podman logs "$NAME" | tail -20; fail "/healthz never answered"; }
log "healthy on $base"

# 4. A real job: the seed chapter's 4-token example through /v1/sdpa.
body='{"q": [[1,1],[0,1],[1,0],[0.5,0.5]], "k": [[1,1],[0,1],[1,0],[0.5,0.5]], "v": [[1,0],[0,1],[1,1],[0.5,0.5]], "need_weights": true}'
resp=$(curl -fsS -H 'Content-Type: application/json' -d "$body" "$base/v1/sdpa")
python3 - "$resp" <<'PY' || fail "wrong numbers from /v1/sdpa: $resp"
import json, sys
r = json.loads(sys.argv[1])
out, w = r["output"][0], r["weights"][0]
ok = abs(out[0] - 0.70) < 0.005 and abs(out[1] - 0.50) < 0.005
ok = ok and all(abs(a - b) < 0.005 for a, b in zip(w, [0.40, 0.20, 0.20, 0.20]))
sys.exit(0 if ok else 1)
PY
log "the seed example gives output row 0 = [0.70, 0.50]"

# And an MHA job on the built-in demo model.
# (Each answer is read whole before grep looks at it: grep -q in a pipe closes it at the first
# match, and under pipefail curl's "Failed writing body" then failed the check, as one run did.)
demo=$(curl -fsS -H 'Content-Type: application/json' \
    -d "{\"query\": [$(python3 -c 'print(",".join("[" + ",".join(str((i * 7 + j) % 5 / 5) for j in range(64)) + "]" for i in range(3)))')]}" \
    "$base/v1/attention") || fail "/v1/attention on the demo model failed"
grep -q '"output"' <<<"$demo" || fail "/v1/attention on the demo model failed"

# And words on the built-in lesson model: 它 looks at 服务器日志 in the coreference head.
lesson=$(curl -fsS -H 'Content-Type: application/json' -d '{"model": "lesson", "text":
    "程序员把服务器日志发给同事，因为它记录了错误原因。", "need_weights": "per_head"}' \
    "$base/v1/attention") || fail "/v1/attention with text on the lesson model failed"
python3 - "$lesson" <<'PY' || fail "lesson: 它's coreference row is not on 服务器日志"
import json, sys
r = json.loads(sys.argv[1])
t, w = r["tokens"], r["weights"][r["head_names"].index("coreference")]
row = w[t.index("它")]
sys.exit(0 if row[t.index("服务器日志")] >= 0.5 else 1)
PY
log "the lesson model's coreference head reads 它 as 服务器日志"

# 5. The page.
page=$(curl -fsS "$base/") || fail "GET / does not serve the page"
grep -qi '<html' <<<"$page" || fail "GET / does not serve the page"

# 6. Not root.
uid=$(podman top "$NAME" user | awk 'NR == 2 {print $1}')
[ -n "$uid" ] && [ "$uid" != root ] && [ "$uid" != 0 ] || fail "attnd runs as '$uid'"
log "the process runs as $uid"

# 7. SIGTERM stops it cleanly, with exit code 0.
podman --runtime runc kill --signal TERM "$NAME" >/dev/null
code=""
for _ in $(seq 1 100); do
    state=$(podman inspect "$NAME" --format '{{.State.Status}}')
    [ "$state" = exited ] && code=$(podman inspect "$NAME" --format '{{.State.ExitCode}}') && break
    sleep 0.1
done
[ "$code" = 0 ] || { podman logs "$NAME" | tail -20; fail "after SIGTERM: state $state, exit code '$code'"; }
log "SIGTERM: exited 0"
podman logs "$NAME" 2>&1 | tail -3

# 8. A rolling update with no 503: the Deployment's settings (deploy/k8s/configmap.yaml, its
#    ATTND_SHUTDOWN_DELAY among them) and its pod's security settings, an old pod and a new one,
#    and a client that sends jobs to the ready ones all along while the old one is stopped
#    (tests/container/rollout.py). ROLLOUT_SHUTDOWN_DELAY=0 shows what happens without the delay.
envs=$(python3 - "${ROLLOUT_SHUTDOWN_DELAY:-}" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open("deploy/k8s/configmap.yaml")) if d]
data = next(d for d in docs if d["metadata"]["name"] == "attnd-settings")["data"]
if sys.argv[1]:
    data["ATTND_SHUTDOWN_DELAY"] = sys.argv[1]
print(" ".join(f"-e {k}={v}" for k, v in data.items() if k not in ("ATTND_LISTEN", "ATTND_MODELS")))
PY
)
grace=$(python3 -c 'import yaml; d = yaml.safe_load(open("deploy/k8s/deployment.yaml")); print(d["spec"]["template"]["spec"]["terminationGracePeriodSeconds"])')
log "rollout: pods with $envs, grace period $grace s"
pod_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
start_pod() { # name port
    # shellcheck disable=SC2086
    podman --runtime runc run -d --name "$1" --network host --read-only --user 10001:10001 \
        --cap-drop ALL --security-opt no-new-privileges \
        --ulimit nofile=20000:20000 --ulimit nproc=32768:32768 \
        $envs -e ATTND_LISTEN="127.0.0.1:$2" "$IMAGE" >/dev/null
    for _ in $(seq 1 100); do
        curl -fsS "http://127.0.0.1:$2/readyz" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    podman logs "$1" | tail -20
    fail "pod $1 never became ready"
}
OLD=$NAME-old NEW=$NAME-new
old_port=$(pod_port) new_port=$(pod_port)
pods_started=1
start_pod "$OLD" "$old_port"
start_pod "$NEW" "$new_port"
timeout 90 python3 tests/container/rollout.py --old "http://127.0.0.1:$old_port" \
    --new "http://127.0.0.1:$new_port" \
    --stop "podman --runtime runc stop -t $grace $OLD" --seconds 60 ||
    { podman logs "$OLD" 2>&1 | tail -8; fail "requests failed across the old pod's stop"; }
code=$(podman inspect "$OLD" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || { podman logs "$OLD" | tail -20; fail "the old pod exited $code"; }
podman logs "$OLD" 2>&1 | grep -E '"msg":"(leaving|draining|stopped)"' | cut -c1-200
log "rollout: zero 503s across the stop; the old pod exited 0"

log "PASS"
