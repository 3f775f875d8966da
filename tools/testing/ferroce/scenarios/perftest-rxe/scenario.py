"""perftest on Linux rxe (GID 1), the reference figures for the perftest scenario (perftest.py)."""

from perftest import scenario_for

scenario = scenario_for("rxe", timeout=480)
