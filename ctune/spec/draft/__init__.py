"""``ctune init``: a sidecar draft from a kernel as its author wrote it.

``source`` reads the file's text (kernels, parameters, macros), ``undefined`` asks
nvcc which names the code uses without defining, ``guess`` turns names and values
into genes and a launch rule, and ``sidecar`` writes the YAML draft and a reference
stub that ``ctune space`` accepts as they are.
"""
