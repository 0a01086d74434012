"""The one exception type a user of bpestore needs to catch."""


class BpestoreError(Exception):
    """A user mistake or a refused operation; the message says how to fix it.

    The CLI prints it as one ``Error: ...`` line and exits non-zero.
    """
