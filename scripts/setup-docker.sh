#!/usr/bin/env bash
# Make the Docker sandbox usable on a fresh Debian machine (CI does this before the tests).
#
#   1. install docker.io and debootstrap from the configured apt mirror, if missing;
#   2. start dockerd without networking (no bridge, no iptables) if no engine answers;
#   3. build the sandbox image offline (atc sandbox build --offline) if it is missing.
#
# Idempotent: when the engine answers and the image exists it returns at once. Needs root for
# steps 1-3 when they have work to do. Talks to nothing but the apt mirror of /etc/apt.
#
# Usage: bash scripts/setup-docker.sh        (from anywhere; the repo is found from this file)
# Env:   ATC_DOCKERD_LOG (default /var/log/atc-dockerd.log), ATC_DOCKER_WAIT (seconds, default 60)

set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
atc="$repo/.venv/bin/atc"
image="atc-sandbox:latest"
log="${ATC_DOCKERD_LOG:-/var/log/atc-dockerd.log}"
wait_s="${ATC_DOCKER_WAIT:-60}"

say() { printf 'setup-docker: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

engine_answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }
image_present() { timeout 20 docker image inspect "$image" >/dev/null 2>&1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root: run 'sudo bash scripts/setup-docker.sh'"; }

if engine_answers && image_present; then
    say "engine answers and $image exists: nothing to do"
    exit 0
fi

# 1. packages ------------------------------------------------------------------------------------
missing=()
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    missing+=(docker.io)
fi
if ! command -v debootstrap >/dev/null 2>&1 && [ ! -x /usr/sbin/debootstrap ]; then
    missing+=(debootstrap)
fi
if [ "${#missing[@]}" -gt 0 ]; then
    need_root "installing ${missing[*]}"
    say "installing ${missing[*]} (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# 2. the engine ----------------------------------------------------------------------------------
if ! engine_answers; then
    need_root "starting dockerd"
    say "starting dockerd (no bridge, no iptables); log: $log"
    mkdir -p "$(dirname "$log")"
    nohup dockerd --bridge=none --iptables=false --ip6tables=false >>"$log" 2>&1 </dev/null &
    for ((i = 0; i < wait_s * 2; i++)); do
        engine_answers && break
        sleep 0.5
    done
    engine_answers || { tail -n 20 "$log" >&2 || true; die "dockerd did not answer within ${wait_s}s (log: $log)"; }
    say "engine is up"
fi

# 3. the image -----------------------------------------------------------------------------------
if ! image_present; then
    [ -x "$atc" ] || die "$atc not found: install the project into .venv first"
    need_root "building $image offline (debootstrap)"
    say "building $image offline"
    "$atc" sandbox build --offline
fi
if [ -x "$atc" ]; then "$atc" sandbox status; fi
