"""Hydra's config groups (data, not code): installed as `rvt_bench.conf` so that an installed
rvt-bench finds them (rvt_bench.core.paths.CONF_DIR)."""
