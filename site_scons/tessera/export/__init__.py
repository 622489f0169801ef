"""A built network for another firmware's build (export=cmake): the
export/ directory's files (files); the SCons glue copies and writes them
(tessera_scons/export.py)."""
