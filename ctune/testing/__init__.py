"""Test helpers shipped with the package (like ``optuna.testing``).

``standins`` holds the stand-in compiler and measurers (named as stand-ins:
none of them is nvcc or a GPU); ``contract_strategy`` and
``contract_objective`` are reusable pytest suites that every strategy or
objective term, built in or third party, subclasses to prove it conforms.
Nothing here is imported by ``import ctune``.
"""
