"""Python references and the makers of the test fixtures and goldens (tools/README.md)."""
