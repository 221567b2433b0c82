"""The subset of bash a launch script needs, to learn what it hands ``pretrain_gpt.py``.

``syntax`` reads words with their quoting, assignments, arrays and compound commands;
``expand`` expands a word (variables, arrays, quoting and field splitting, ``$(( ))``);
``run`` runs the statements (``export``, ``if``/``case``/``while``, ``source``,
``bash -c``, here-documents) without starting a process.
"""
