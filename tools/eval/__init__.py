"""Quality tables and checks on the dev data (tools/README.md)."""
