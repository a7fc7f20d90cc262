"""Tools that work from a source checkout only (image builds); not part of the installed package."""
