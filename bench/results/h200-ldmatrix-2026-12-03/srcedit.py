"""The source edits of this folder's timing experiments (backoff.py, trace.py, waitall.py).
SourceEdit(path) reads a file; sub(old, new) replaces the one occurrence of old (exits 1, naming
the anchor, if there are none or several); save() writes the file back. A script that fails part
way has written nothing."""
import sys


class SourceEdit:
    def __init__(self, path):
        self.path = path
        self.text = open(path).read()

    def sub(self, old, new):
        n = self.text.count(old)
        if n != 1:
            sys.exit(f"{self.path}: anchor found {n} times: {old[:70]!r}")
        self.text = self.text.replace(old, new)

    def save(self):
        open(self.path, "w").write(self.text)
