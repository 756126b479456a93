"""Executor backends: the engines that do node work (SSH today; Slurm, the GPU Operator, Ansible)."""
