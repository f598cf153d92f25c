"""Stands in for Cython's ``cython`` module when Cython is not installed.

The core's modules are plain Python that Cython can compile (its "pure Python
mode", see :mod:`purgatory.core.build`); the few that ask ``cython.compiled``
get ``False`` here when they run as plain Python without Cython around.
"""

compiled = False
