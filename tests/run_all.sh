#!/usr/bin/env bash
# The README's test command after `python3 -m venv .venv`: install, check, test.
#
# What runs (each step as it would alone; the README says why each is there):
#   install:  tests/install_wheels.sh (both distributions as a user gets them, into .venv)
#             beside tests/install_deps.sh (kcat, redis-server, redis-sentinel, the Node.js
#             clients): one builds with the compiler, the other mostly waits on apt and npm;
#   lane 1:   pytest, the whole suite on the compiled build, in three worker processes (-n 3:
#             its tests wait on JVMs and servers often enough that a third keeps the cores
#             busier: 249 s instead of 275 s on a quiet machine; worksteal evens the ends);
#   lane 2:   beside lane 1: ruff, ruff format, mypy --strict (both distributions),
#             tests/other_pythons.sh (the library on CPython 3.12 and 3.13), then pytest on
#             the pure build (all but `system`, -n 2): last, because it is the step that
#             keeps both cores busy once lane 1 has ended (other_pythons.sh is mostly one
#             process; run last, it left a core idle for a minute on a quiet machine).
# The lanes take about as long as each other on a quiet machine, and they are independent:
# no test writes into the repository (each uses its own temporary folder and free ports;
# lane 2's pytest keeps no .pytest_cache, other_pythons.sh writes build/other_pythons).
# Side by side they keep both cores busy while one lane waits on a JVM or a server, and a
# machine that another job keeps busy gives more of its cores to four processes than to
# two. Lane 2's output is kept in build/lane2.log and printed when it ends; the run fails
# if any step fails, once both lanes have ended. Each step's time is printed
# (`run_all.sh: <seconds> s: <step>`), to keep the budget in view: the README states the
# total.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bin=.venv/bin
[ -x "$bin/python" ] || { echo "run_all.sh: no .venv here: python3 -m venv .venv first" >&2; exit 1; }
mkdir -p build
linted=(purgatory tests examples benchmarks docs/examples docs/conf.py setup.py cython_build.py broker)

# Run "$@" and print its time; its exit status is the step's.
step() {
    local started=$SECONDS status=0 failed=""
    "$@" || status=$?
    [ "$status" -eq 0 ] || failed=" (failed: exit $status)"
    echo "run_all.sh: $((SECONDS - started)) s: $*$failed"
    return "$status"
}

install() {
    local deps_log=build/install_deps.log deps
    bash tests/install_deps.sh >"$deps_log" 2>&1 &
    deps=$!
    step bash tests/install_wheels.sh || { wait "$deps" || true; return 1; }
    wait "$deps" || { cat "$deps_log" >&2; echo "run_all.sh: tests/install_deps.sh failed" >&2; return 1; }
    cat "$deps_log"
}

lane1() {
    step env PURGATORY_EXPECT_INSTALLED=1 PURGATORY_EXPECT_COMPILED=1 "$bin/pytest" -n 3 \
        --dist worksteal
}

lane2() {
    step "$bin/ruff" check "${linted[@]}" &&
        step "$bin/ruff" format --check "${linted[@]}" &&
        step "$bin/mypy" --strict &&
        step "$bin/mypy" --strict broker/setup.py &&  # a second module named setup
        step bash tests/other_pythons.sh &&
        step env PURGATORY_EXPECT_INSTALLED=1 PURGATORY_NO_EXTENSIONS=1 "$bin/pytest" -n 2 \
            --dist worksteal -p no:cacheprovider -m "not system"
}

SECONDS=0
install
lane2 >build/lane2.log 2>&1 &
lane2_pid=$!
lane1_status=0
lane1 || lane1_status=$?
lane2_status=0
wait "$lane2_pid" || lane2_status=$?
echo "--- lane 2 (checks, the pure build, other Pythons): build/lane2.log"
cat build/lane2.log
echo "run_all.sh: $SECONDS s in all"
[ "$lane1_status" -eq 0 ] || { echo "run_all.sh: lane 1 (the compiled build's tests) failed" >&2; exit 1; }
[ "$lane2_status" -eq 0 ] || { echo "run_all.sh: lane 2 failed (above)" >&2; exit 1; }
