"""The fleet: which nodes, how to reach them, and what running things on them returns.

Host specs and inventories (:mod:`.inventory`, :mod:`.nodeset`), the asyncssh pool
(:mod:`.transport`), probes over SSH or NVML (:mod:`.probes`, :mod:`.nvml_probe`),
step execution (:mod:`.executor`), secret redaction (:mod:`.redact`) and the result
envelope every host answers with (:mod:`.results`).
"""
