#!/usr/bin/env bash
# Installs the non-Python Kafka clients that the client-matrix tests run
# (broker/broker_tests/wire/test_matrix_*.py). Idempotent: what is there is kept.
set -euo pipefail

# --- kcat (librdkafka), for test_matrix_kcat.py: from Debian's packages ----------
if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install.sh: kcat is missing and installing it needs root (apt-get install kcat)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

# --- the Node.js clients, for test_matrix_node.py: npm ci from the lock file --------
# kafkajs 2.x and @platformatic/kafka 1.x and 2.x (aliases platformatic-kafka-1/-2) in
# clients/node/node_modules; skipped when that install matches package-lock.json.
(
    cd "$(dirname "${BASH_SOURCE[0]}")/node"
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        echo "install.sh: node and npm are missing (Node.js 20 or later)" >&2
        exit 1
    fi
    if ! cmp -s package-lock.json node_modules/.installed-package-lock.json 2>/dev/null; then
        npm ci --no-audit --no-fund --loglevel=error >/dev/null
        cp package-lock.json node_modules/.installed-package-lock.json
    fi
)
