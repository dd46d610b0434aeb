"""The ``hypograph`` command: flags into the products' settings models (validated before any run
exists), then the same jobs the UI launches (``pipelines/launch.py``). Outside the code location."""
