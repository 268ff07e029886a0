"""Project tests. ``pytester`` drives the conformance plugin end to end in subprocesses."""

pytest_plugins = ["pytester"]
