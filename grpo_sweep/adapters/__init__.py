"""Every use of another library's private API or internals (a private name, a class subclassed to swap into its objects,
a module it does not export), one module per library, each with a guard test (tests/test_adapters.py) that fails loudly,
naming the library and version, when an upgrade removes what it uses. Nothing else in grpo_sweep reaches into a
library's internals."""
