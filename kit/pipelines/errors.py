"""The one error type for a request that is invalid in itself."""


class InputError(ValueError):
    """The request is invalid; the message says what is wrong and goes back to its client alone."""
