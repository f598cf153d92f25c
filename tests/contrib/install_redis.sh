#!/usr/bin/env bash
# Installs redis-server for tests/contrib/test_redis_bridge.py (Debian/Ubuntu, as root).
# Idempotent and quiet: does nothing when redis-server is already on PATH.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
    exit 0
fi
if [[ "$(id -u)" -ne 0 ]]; then
    echo "install_redis.sh: redis-server is missing; run as root (or: sudo apt-get install -y redis-server)" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_redis.sh: redis-server is missing and apt-get is not available: install redis-server by hand" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq redis-server >/dev/null
command -v redis-server >/dev/null 2>&1 || {
    echo "install_redis.sh: apt-get installed redis-server but it is not on PATH" >&2
    exit 1
}
