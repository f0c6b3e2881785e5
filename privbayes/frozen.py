"""Models are immutable: the prior a certificate names must be the prior that is used."""

from __future__ import annotations


class Frozen:
    """Refuses attribute assignment once ``_freeze()`` has run (end of ``__init__``)."""

    __frozen = False

    def _freeze(self) -> None:
        object.__setattr__(self, "_Frozen__frozen", True)

    def __setattr__(self, name: str, value) -> None:
        if self.__frozen:
            raise AttributeError(
                f"{type(self).__name__} is immutable (its prior is part of every certificate); "
                "build a new model instead"
            )
        object.__setattr__(self, name, value)
