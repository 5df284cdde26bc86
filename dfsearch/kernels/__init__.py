"""What a workload is made of: kernel kinds, graph structure, sharding layouts, generators.

"Kernels" are the workload's compute kernels (DFModel's vocabulary), not Numba functions.
"""
