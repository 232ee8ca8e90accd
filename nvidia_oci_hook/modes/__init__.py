"""The ways a container engine runs the engine: runtime wrapper, precreate filter, prestart guard.

These run on every container start: they import only the standard library's cheap modules and the engine.
"""
