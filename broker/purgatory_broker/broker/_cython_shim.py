"""Stands in for Cython's ``cython`` module in the broker's compiled modules when
Cython is not installed (as :mod:`purgatory.core`'s own stand-in does for the core:
the parts reach each other only through public modules). The modules that ask
``cython.compiled`` get ``False`` here when they run as plain Python.
"""

compiled = False
