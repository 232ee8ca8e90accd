"""The CDI rules, one module per family of codes:

loader: CDI0xx, the reasons the CDI library refuses to load a spec (the rules of `--schema-only`)
semantic: CDI1xx, specs the library loads whose devices fail, or do the wrong thing, when they are injected
directories: CDI2xx, spec directories as the library's cache reads them
"""
