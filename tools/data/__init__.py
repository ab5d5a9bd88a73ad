"""Sample and request makers (tools/README.md)."""
