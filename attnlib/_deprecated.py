"""Old names that keep working: a renamed keyword argument, a renamed function.

Each warns and names the new one. A renamed keyword warns with a
``DeprecationWarning``; a renamed function with a
``PendingDeprecationWarning``, as :func:`attnlib.attention_pattern` does
(hidden by default, so an old notebook cell writes nothing to stderr).
"""
from __future__ import annotations

import functools
import warnings


def renamed_keywords(**old_to_new):
    """Decorator: a caller that passes a keyword by its old name still works, warned of the new one.

    ``@renamed_keywords(pattern="A")`` lets ``f(pattern=x)`` run as
    ``f(A=x)`` with a ``DeprecationWarning`` that names ``A``; positional
    callers are unaffected, and passing both names is a ``TypeError``.

    Examples
    --------
    >>> import warnings
    >>> @renamed_keywords(pattern="A")
    ... def total(A, scale=1):
    ...     return A * scale
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     total(pattern=3, scale=2), str(caught[0].message)
    (6, "total(): the argument 'pattern' is now called 'A'")
    """
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{f.__name__}() got both {old!r} (the old name) and {new!r}")
                    warnings.warn(f"{f.__name__}(): the argument {old!r} is now called {new!r}",
                                  DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return f(*args, **kwargs)
        return wrapper
    return decorate


def renamed_function(new, old: str, why: str = ""):
    """``new`` under its old dotted name ``old``: the same call, with a ``PendingDeprecationWarning``.

    The warning names ``new`` (and ``why`` the name changed) and points at
    the caller's line.
    """
    name = f"{new.__module__}.{new.__name__}"

    @functools.wraps(new)
    def alias(*args, **kwargs):
        warnings.warn(f"{old} is the old name of {name}{f' ({why})' if why else ''}; call {new.__name__}",
                      PendingDeprecationWarning, stacklevel=2)
        return new(*args, **kwargs)

    alias.__name__ = alias.__qualname__ = old.rsplit(".", 1)[-1]
    alias.__doc__ = (f"Deprecated name of :func:`{name}` (the same function{f'; {why}' if why else ''}).\n\n"
                     f"Issues a ``PendingDeprecationWarning``, as :func:`attnlib.attention_pattern` does.")
    return alias
