"""The one error type the roofline raises for inputs a user can get wrong."""


class RooflineInputError(ValueError):
    """An impossible or unsupported configuration; the message says what is allowed."""
