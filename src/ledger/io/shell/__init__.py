"""The subset of bash a launch script needs, to learn what it hands ``pretrain_gpt.py``.

``syntax`` reads words with their quoting, assignments, arrays and compound commands;
``run`` expands and runs them (variables, arrays, ``export``, ``if``/``case``/``while``,
``source``, ``bash -c``, here-documents) without starting a process.
"""
