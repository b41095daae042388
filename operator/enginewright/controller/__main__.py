"""python -m enginewright.controller: run the operator."""

from enginewright.controller.handlers import run

run()
