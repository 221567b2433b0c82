"""The toys by name and the world sizes each is laid out for (no torch here, so the
command line can refuse a bad world before torch is loaded)."""

TOYS = ("zero", "tp", "cp", "pp", "ep")
SPAWN_BASELINE = "spawn"  # import + init + one all-reduce: the floor of any launch
# 8 elements, 8 tokens and heads, 8 experts split evenly; tp runs world/2 pairs side by
# side; pp one stage per rank
WORLDS = {"zero": (2, 4, 8), "tp": (2, 4, 8), "cp": (2, 4, 8), "pp": tuple(range(2, 9)),
          "ep": (2, 4, 8), SPAWN_BASELINE: tuple(range(2, 9))}
