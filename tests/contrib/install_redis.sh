#!/usr/bin/env bash
# Installs redis-server and redis-sentinel for tests/contrib (the bridge's tests on one
# Redis and on Redis Sentinel), from Debian/Ubuntu's packages, as root.
# Idempotent and quiet: does nothing when both are already on PATH.
set -euo pipefail

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
if [[ "${#missing[@]}" -eq 0 ]]; then
    exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
    echo "install_redis.sh: ${missing[*]} missing; run as root (or: sudo apt-get install -y ${missing[*]})" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_redis.sh: ${missing[*]} missing and apt-get is not available: install by hand" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${missing[@]}" >/dev/null
for program in "${missing[@]}"; do
    command -v "$program" >/dev/null 2>&1 || {
        echo "install_redis.sh: apt-get installed $program but it is not on PATH" >&2
        exit 1
    }
done
