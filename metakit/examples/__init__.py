"""Example metadata modules; ``metakit.examples.engine`` needs torch."""
