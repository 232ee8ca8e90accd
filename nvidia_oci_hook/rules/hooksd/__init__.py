"""HKD: hooks.d files and directories, as podman and cri-o load them (containers/common pkg/hooks).

`refusals`: HKD0xx, what the loader refuses (part of --schema-only): a refused file stops the engine.
`silent_failures`: HKD1xx, what the loader accepts without a word although the hook will not run, or not as written.
`directories`: HKD2xx, what only the whole directory shows: passed-over, unreadable, masked and repeated files.
`loading`: one file's reading and the existence check on its program, cached per run, which all three consult.
"""
