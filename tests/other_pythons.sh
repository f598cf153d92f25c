#!/usr/bin/env bash
# The library on the other CPythons it supports: a short pass on 3.12 and 3.13 (issue #35).
#
# The README's test command runs the whole suite on the venv's Python (3.11); this adds,
# for each other version, a venv of its own (build/other_pythons/<version>/) holding the
# wheel built from the library's sdist (made by tests/install_wheels.sh), its extras and
# the test tools, then runs a subset of the suite twice against it, from the repository
# but importing the installed package (PURGATORY_EXPECT_INSTALLED): compiled
# (PURGATORY_EXPECT_COMPILED) and pure (PURGATORY_NO_EXTENSIONS). The interpreters are
# found under pyenv's root, else as pythonX.Y on PATH; a missing one fails the run with
# one line. Arguments: the versions (default: 3.12 3.13).
#
# Time, not coverage, picks the subset: the async shell on every backend (tests/aio), the
# core's purgatory, timer, operation, idle tracker and build flag, and the public API
# (12 s a build). Left out, measured on CPython 3.12 (2 cores, load 2-3): the C
# portability checks (16 s, the same C on every version), the property runs (7 s), the
# million-operation purge (3 s). The C is compiled at -O0 (10 s instead of 37 s at -O3):
# this pass checks that the generated C builds against each version's headers and
# behaves, not how fast it runs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
versions=("$@")
[ "${#versions[@]}" -gt 0 ] || versions=(3.12 3.13)
subset=(
    tests/aio tests/test_public_api.py tests/core/test_build.py tests/core/test_purgatory.py
    tests/core/test_timer.py tests/core/test_operation.py tests/core/test_idle.py
)
deselect=(--deselect
    tests/core/test_purgatory.py::test_purge_bounds_memory_with_a_million_operations_completed_outside)
# what the subset imports beyond the library's extras (with the dev extra's ranges);
# setuptools and Cython also build the wheel (the build requirements' ranges)
test_deps=(pytest pytest-asyncio pytest-timeout numpy setuptools cython)
# the library's extras the subset needs (tests/test_public_api.py imports contrib/)
extras=(uvloop trio redis prometheus)
work="$root/build/other_pythons"

fail() {
    echo "other_pythons.sh: $*" >&2
    exit 1
}

# The interpreter of version $1 (X.Y): the newest X.Y.Z (not a free-threaded X.Y.Zt)
# under pyenv's root (`pyenv root`, else $PYENV_ROOT or ~/.pyenv), else pythonX.Y on
# PATH; checked by running it (a pyenv shim for a version not selected fails).
find_python() {
    local version="$1" found="" pyenv_root
    pyenv_root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
    found="$(ls -d "$pyenv_root"/versions/"$version".*/bin/python"$version" 2>/dev/null |
        grep -E "/$version\.[0-9]+/bin/" | sort -V | tail -n 1 || true)"
    [ -n "$found" ] || found="$(command -v "python$version" || true)"
    [ -n "$found" ] && "$found" -c "import sys; sys.exit(sys.version_info[:2] != (${version/./,}))" \
        2>/dev/null && echo "$found"
}

# A venv for version $1 with interpreter $2: the test tools, then the wheel built (in
# the venv: no isolated build environment to make) from the unpacked sdist.
install() {
    local version="$1" python="$2" venv="$work/$1"
    local pip=("$venv/bin/python" -m pip -q)
    # chained: called where a failure is handled (||), set -e does not stop it. One
    # resolve for the tools and the extras' requirements; no .pyc compiled ahead for a
    # venv that runs two short passes (most of numpy, Cython and setuptools is never
    # imported); the wheel itself with --no-deps (its requirements are there)
    "$python" -m venv "$venv" &&
        "${pip[@]}" install --no-compile "${requirements[@]}" &&
        CFLAGS=-O0 "${pip[@]}" wheel --no-build-isolation --no-deps -w "$work/wheels" "$work/src" &&
        "${pip[@]}" install --no-compile --no-deps "$(ls "$work"/wheels/aio_purgatory-*-cp"${version/./}"-*.whl)"
}

sdist="$(ls "$root"/build/wheels/sdist/aio_purgatory-*.tar.gz 2>/dev/null || true)"
[ -n "$sdist" ] || fail "no sdist in build/wheels/sdist: run tests/install_wheels.sh first"
pythons=()
for version in "${versions[@]}"; do
    python="$(find_python "$version")" ||
        fail "no CPython $version (looked under \`pyenv root\`/versions and for python$version on PATH)"
    pythons+=("$python")
done

rm -rf "$work"
mkdir -p "$work/src" "$work/wheels"
# one unpacked sdist for every version: Cython writes its C once (under its build/cython/;
# the same C serves every CPython), and pip caches no wheel built from a folder, so no
# stale wheel from an earlier run is reused
tar -xzf "$sdist" -C "$work/src" --strip-components=1
only=() extra=()
for name in "${test_deps[@]}"; do only+=(--only "$name"); done
for name in "${extras[@]}"; do extra+=(--extra "$name"); done
mapfile -t requirements < <(
    "${pythons[0]}" "$root/tests/dev_requirements.py" "${only[@]}" "$root"
    "${pythons[0]}" "$root/tests/dev_requirements.py" "${extra[@]}" "$root"
)

for i in "${!versions[@]}"; do
    version="${versions[$i]}"
    log="$work/$version.log"
    SECONDS=0
    install "$version" "${pythons[$i]}" >"$log" 2>&1 ||
        { tail -n 20 "$log" >&2; fail "installing on CPython $version failed (log: $log)"; }
    echo "other_pythons.sh: CPython $version (${pythons[$i]}): installed in $SECONDS s"
    for build in PURGATORY_EXPECT_COMPILED PURGATORY_NO_EXTENSIONS; do
        out="$work/$version-$build.log"
        (cd "$root" && env PURGATORY_EXPECT_INSTALLED=1 "$build=1" "$work/$version/bin/pytest" \
            -q -p no:cacheprovider "${deselect[@]}" "${subset[@]}") >"$out" 2>&1 ||
            { tail -n 40 "$out" >&2; fail "the tests failed on CPython $version ($build)"; }
        echo "other_pythons.sh: CPython $version, $build: $(tail -n 1 "$out")"
    done
done
