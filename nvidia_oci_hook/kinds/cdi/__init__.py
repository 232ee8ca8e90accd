"""CDI specs as each release of container-device-interface, the CDI library engines vendor, reads them; one module
per concern:

releases: the library releases modelled and where each differs, which engine releases vendor which, judges
codes: the names of the cdi and cdi-dirs kinds, and the codes of the rules that report why the library refuses a spec
goformat: Go's formatting (strconv.Quote, FormatFloat, encoding/json floats) where the library's messages depend on it
names: the library's vendor, class and device name checks (pkg/parser), with its error texts
goyaml: a spec's text as goyaml.v2 reads it (`go_yaml_load`, `refine_document`), and the cdi document kind
specs_go: the specs-go types and decoded structs, the versions the library knows and fields need, edits views
decoding: the conversion to JSON and the strict decoding into the specs-go types, every error kept
validation: Spec.validate's checks, and `analyse`: every reason the library refuses a spec, in its order
directories: spec directories as the library's cache reads them, the devices it resolves, the cdi-dirs kind
"""
