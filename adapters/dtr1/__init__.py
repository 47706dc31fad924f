"""DT-R1 (arXiv 2511.12365): plan a DAG of vision tools, read the digital twin, run code, answer."""
