#!/usr/bin/env bash
# Measure what compiling the timer core with mypyc would buy (not shipped; see BENCHMARKS.md).
# Copies the package to a scratch folder, lets TimerTask & co. be subclassed from Python,
# compiles core timer_list, timing_wheel, delay_queue and timer, and runs timer_bench.py
# against the compiled copy and then against the pure package, one after the other.
# Needs mypy (the dev extra) and a C compiler.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$here/../purgatory" "$scratch/"
cd "$scratch"
"$python" - <<'PY'
path = "purgatory/core/timer_list.py"
src = open(path).read()
src = src.replace(
    "from collections.abc import Callable, Iterator\n",
    "from collections.abc import Callable, Iterator\n\nfrom mypy_extensions import mypyc_attr\n",
)
for cls in ("class TaskCounter:", "class _Link:", "class TimerTaskEntry(_Link):",
            "class TimerTask(TimerTaskEntry):", "class TimerTaskList(_Link):"):
    src = src.replace(cls, "@mypyc_attr(allow_interpreted_subclasses=True)\n" + cls)
open(path, "w").write(src)
PY
cat > setup.py <<'PY'
from mypyc.build import mypycify
from setuptools import setup

modules = ["timer_list", "timing_wheel", "delay_queue", "timer", "report", "clock"]
setup(name="mypyc-experiment", ext_modules=mypycify([f"purgatory/core/{m}.py" for m in modules]))
PY
"$python" setup.py -q build_ext --inplace > build.log 2>&1 || { cat build.log; exit 1; }
echo "== compiled (mypyc) =="
PYTHONPATH="$scratch" "$python" "$here/timer_bench.py" "$@"
echo "== pure Python =="
cd "$here/.." && "$python" "$here/timer_bench.py" "$@"
