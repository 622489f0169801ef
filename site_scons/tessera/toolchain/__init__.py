"""What the ./scons wrapper runs before SCons: the compilers and emulators
the requested targets need, installed when missing (bootstrap)."""
