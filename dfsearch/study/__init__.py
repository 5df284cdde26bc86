"""Design-space studies: a base spec, axes of values (field paths or catalogue presets),
their points, a sweep over them streamed to a table, Pareto fronts and plots
(docs/studies.md).

Modules: ``catalogue`` (the DFModel paper's chips, memories, interconnects, topologies),
``filters`` (the filter language), ``study`` (the study file and its points), ``table``
(the results table), ``runner`` (the sweep: in-process, process pool, Dask), ``pareto``,
``plots`` (matplotlib, optional). Importing this package imports none of numba, optuna or
matplotlib.
"""
