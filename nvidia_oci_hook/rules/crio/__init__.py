"""CRO: the cri-o configuration rules.

- values: every CRO rule, for now in one module.
"""
