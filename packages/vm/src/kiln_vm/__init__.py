"""kiln_vm: the Python VM linker, the reference backend that calls each Op's ``perform``."""

from kiln_vm._linker import VMLinker as VMLinker
