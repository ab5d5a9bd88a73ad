"""Training: tools/train/train.sh, train.py, export.py (run as files; tools/README.md)."""
