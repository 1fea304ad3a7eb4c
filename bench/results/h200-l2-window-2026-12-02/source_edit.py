"""The source edits of this folder's patch scripts (trace_patch.py, tile_trace_patch.py,
kvnext_patch.py): Edit(path) reads a file, once(old, new) replaces text that must occur exactly
once (an AssertionError names it otherwise: the kernel changed under the script), save() writes it
back."""


class Edit:
    def __init__(self, path):
        self.path = path
        self.text = open(path).read()

    def once(self, old, new):
        assert self.text.count(old) == 1, f"{self.path}: expected this exactly once:\n{old}"
        self.text = self.text.replace(old, new)

    def save(self):
        open(self.path, "w").write(self.text)
