"""ragbench: batch evaluation of RAG retrieval configurations on your own labelled queries.

Data flows one way::

    dataset -> chunks -> vectors -> index -> runs -> judgments -> metrics -> store / report -> promotion

Each stage is a module of this package with typed inputs and outputs; ``flows/`` only wires them together.
"""

__version__ = "0.1.0"
