"""hooks.d files and directories, as podman and cri-o read them (containers/common `pkg/hooks`).

`hook_file`: the document kind `hooksd`, `HookFile` (what the loader makes of one file) and the loader's codes.
`reading`: `read_hook`, the loader's two decoding passes and its validation on one parsed file.
`go_json`: Go's encoding/json for the loader's structs (case-insensitive keys, null, type errors), and Go's %q.
`directories`: the directory kind `hooksd-dirs`; `read_hooks_dirs` reads directories the way `hooks.New` does.
"""
