#!/usr/bin/env bash
# What the test suite needs beyond the Python packages of the dev extra: kcat,
# redis-server and redis-sentinel (Debian's packages, one apt-get for all, as root) and, in the repository,
# the application's Node.js Kafka clients (npm ci from their lock file). Idempotent and quiet: what is there is kept.
# The README's test command runs it; the scripts it calls can also run on their own.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "install_deps.sh: ${missing[*]} missing; install as root with apt-get install ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# the application's client matrix (the repository's broker/; not in the library's sdist)
matrix="$here/../broker/broker_tests/wire/clients/install.sh"
if [ -f "$matrix" ]; then
    bash "$matrix"  # kcat is there now: the Node clients
fi
bash "$here/contrib/install_redis.sh"                   # redis-server and redis-sentinel are there now: a check
