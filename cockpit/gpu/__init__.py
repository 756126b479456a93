"""GPU knowledge: what a node's driver and GPUs are, and what their outputs mean.

The node state model (:mod:`.nodestate`), parsers of nvidia-smi and /proc outputs
(:mod:`.parsers`), the CUDA/driver compatibility gate (:mod:`.compat`) and log triage
(:mod:`.triage`). Pure: text in, facts out.
"""
