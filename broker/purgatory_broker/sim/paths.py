"""The run's output paths, checked before anything starts.

A run writes two things: the partition logs under ``data_dir`` (a temporary
directory when None) and the Parquet trace at ``trace_path`` (none when None).
Both are checked first, so a bad path fails in a second with one message and
nothing created, not after the whole run:

* ``data_dir``: if it exists it must be an empty directory we can write to;
  if not, its nearest existing ancestor must be a directory we can write to
  (it is created when the run starts);
* ``trace_path``: must not be a directory; if it exists it must be a writable
  file; its nearest existing ancestor must be a directory we can write to (the
  missing folders are made when the trace is written, after the run).

"Can write to" is tried, not guessed from permission bits: a probe file is
created in the directory and removed (root may write where the bits say no; a
read-only file system refuses everyone).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .config import SimulationConfig

__all__ = ["check_output_paths"]


def _existing_ancestor(path: Path) -> Path:
    """``path`` itself or its nearest existing ancestor. O(depth)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path.cwd()  # pragma: no cover - a relative path's anchor always exists


def _writable_dir_problem(directory: Path) -> str:
    """Why files cannot be created in ``directory`` ('' if they can). O(1)."""
    if not directory.is_dir():
        return f"{directory} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return f"{directory} is not writable ({exc.strerror or exc})"
    return ""


def _data_dir_problem(data_dir: Path) -> str:
    if data_dir.exists():
        if not data_dir.is_dir():
            return f"data_dir {data_dir} is a file, not a directory"
        if any(data_dir.iterdir()):
            return (
                f"data_dir {data_dir} is not empty: give an empty or new directory "
                "(the simulation never reuses old logs)"
            )
        problem = _writable_dir_problem(data_dir)
        return f"data_dir: {problem}" if problem else ""
    ancestor = _existing_ancestor(data_dir)
    problem = _writable_dir_problem(ancestor)
    return f"data_dir {data_dir} cannot be created: {problem}" if problem else ""


def _trace_path_problem(trace_path: Path) -> str:
    if trace_path.is_dir():
        return f"trace_path {trace_path} is a directory; give a file name (e.g. trace.parquet)"
    if trace_path.exists():
        if not os.access(trace_path, os.W_OK):
            return f"trace_path {trace_path} is not writable"
        ancestor = trace_path.parent
    else:
        ancestor = _existing_ancestor(trace_path.parent)
    problem = _writable_dir_problem(ancestor)
    return f"trace_path {trace_path} cannot be written: {problem}" if problem else ""


def check_output_paths(config: SimulationConfig) -> None:
    """Raise ValueError (one line) if the run could not write its logs or its trace;
    creates nothing. See the module doc. O(path depth)."""
    problems = []
    if config.data_dir is not None:
        problems.append(_data_dir_problem(Path(config.data_dir)))
    if config.trace_path is not None:
        problems.append(_trace_path_problem(Path(config.trace_path)))
    problems = [p for p in problems if p]
    if problems:
        raise ValueError("; ".join(problems))
