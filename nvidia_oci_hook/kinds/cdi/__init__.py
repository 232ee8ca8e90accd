"""CDI specs as container-device-interface v1.0.1 reads them; one module per concern:

validation: the whole model, until its concerns move into modules of their own
"""
