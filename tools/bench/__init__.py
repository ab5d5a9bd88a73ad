"""Benchmarks (tools/README.md)."""
