"""The bundled demo's files (data, not code): installed as `rvt_bench.demo` (docs/benchmarks/demo.md)."""
