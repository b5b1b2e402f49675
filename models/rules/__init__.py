"""Domain rules: pure functions over plain data (no I/O, no Ray), shared by the write path
(``actors``) and the lifecycle sweeps (``lifecycle``), which never import each other."""
