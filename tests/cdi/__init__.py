"""CDI specs and spec directories: rule cases, the corpus, and agreement with the CDI Go library."""
