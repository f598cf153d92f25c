"""The tests of purgatory-broker (a package named apart from the library's ``tests``, so one
pytest run at the repository root collects both suites)."""
