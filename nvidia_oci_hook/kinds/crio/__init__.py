"""The cri-o configuration kinds.

- key_table: cri-o's configuration model, the merge of its drop-ins and the kinds, for now in one module.
"""
