"""The package's version, in a module of its own: the lowest layer, so that modules below the
package's ``__init__`` (the on-disk cache keys its entries by it) read it without importing the
package's front (no import cycle, docs/design.md §10); ``setup.cfg`` reads it from here."""

__version__ = "0.1.0"
