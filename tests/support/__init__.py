"""Helpers the tests import (not fixtures: those are in the conftest.py files)."""
