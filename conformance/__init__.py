"""Drive the reference and the installed vLLM in lockstep and demand identical behaviour.

Everything that touches vLLM lives here (``conformance.adapters``); ``reference`` never imports it.
Importing this package does not import vLLM: adapters import it lazily when systems are built.
"""
