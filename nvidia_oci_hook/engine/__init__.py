"""The reconcile engine: pure transforms (config, HostView, Settings) -> (new config, edits, findings).

`pipeline.plan` composes them; the wrapper, the precreate filter, the prestart guard and `reconcile` all call
it. Everything here runs on every container start, so it imports only the standard library's cheap modules.
"""
