"""While the grader judges a test cell: the instructor's functions in place, the library's answers withheld.

:class:`judging` marks what a test cell judges, so that each point is judged
on its own function: while the grader runs the block, every exercise function
already judged by an earlier cell is the instructor's version, so one wrong
helper costs its own points and no others. While any block runs (graded or
not), the library functions an exercise asks students to write (marked
:func:`answer_of`, which calls :func:`asked`, e.g.
:func:`attnlib.attribution.logit_attribution`) are withheld: calling one
raises :class:`Withheld`, which names it.

The grader's own hooks (``_offer``, ``_hidden``, ``_called_as``) are here too;
the students' checks are :mod:`attnlib.checks`, which also gives the names a
notebook imports from it (``from attnlib.checks import check_array, judging``).
"""
from __future__ import annotations

import ast
import functools
import inspect
import sys


_offered: str | None = None   # the grader's source for the next judging block
_MISSING = object()
_quiet: tuple | None = None   # while the hidden tests run: the streams and display put aside, and the sink
HIDDEN_PRINTS = ("[what your code printed or displayed while the hidden tests ran is not shown:"
                 " it would give their inputs away]")
# written to the cell's own output around the hidden tests: the feedback drops what lies between
# (what student code wrote to a stream it kept aside, which the quiet does not catch)
HIDDEN_BEGIN, HIDDEN_END = "[pm-grader: hidden tests begin]\n", "[pm-grader: hidden tests end]\n"
_judged: tuple = ()           # while a judging block runs: the names it judges


class Withheld(AssertionError):
    """A library function that an exercise asks for was called while a student's function was judged.

    An ``AssertionError``, as every failed check is: the test cell fails with its message.
    """


def asked(function: str) -> None:
    """Raise :class:`Withheld` if a :class:`judging` block is running: ``function`` is an exercise's answer.

    A library function that an exercise asks students to write calls this
    first, in its own body. The check is made when the function runs, not
    when it is looked up, so a reference to it saved earlier
    (``from attnlib.attribution import logit_attribution as la``) is
    withheld as well.

    Examples
    --------
    >>> asked("attnlib.attribution.logit_attribution")   # outside a judging block: nothing happens
    """
    if _judged:
        raise Withheld(f"{function} is what this exercise asks you to write: the library's version cannot be"
                       f" called while {', '.join(_judged)} is checked. Compute it with numpy and the"
                       " model's trace (your own functions of this notebook may call each other)")


def answer_of(exercise: str):
    """Decorator: the library function is what ``exercise`` asks students to write (see :func:`asked`).

    The function calls :func:`asked` with its own full name first, so it is
    withheld while a :class:`judging` block runs; ``function.answer_of`` names
    the exercise.

    Examples
    --------
    >>> @answer_of("00_example")
    ... def double(x):
    ...     return 2 * x
    >>> double(2), double.answer_of
    (4, '00_example')
    >>> with judging("anything"):  # doctest: +ELLIPSIS
    ...     double(2)
    Traceback (most recent call last):
    attnlib.grader.Withheld: attnlib.grader.double is what this exercise asks you to write: ...
    """
    def mark(function):
        name = f"{function.__module__}.{function.__qualname__}"

        @functools.wraps(function)
        def withheld(*args, **kwargs):
            asked(name)
            return function(*args, **kwargs)
        withheld.answer_of = exercise
        return withheld
    return mark


def _offer(source: str) -> None:
    """For the grader only: the instructor's versions of the functions judged so far.

    The grader puts one call to this at the top of a test cell; the cell's
    :class:`judging` block takes the source and puts those functions in place
    of the student's while it runs. The source holds only functions whose own
    test cells have already run, so nothing in it can earn a later point.
    """
    global _offered
    _offered = source


class _Sink:
    """Takes what is written and keeps only its length."""

    def __init__(self):
        self.written = 0

    def write(self, text):
        self.written += len(text)
        return len(text)

    def flush(self):
        pass


def _hidden(begin: bool) -> None:
    """For the grader only: what student code prints or displays during the hidden tests is not shown.

    It would show the hidden tests' inputs (a function that prints its
    arguments), and the feedback would hand them to the student. The grader
    puts ``_hidden(True)`` before a test cell's hidden region and
    ``_hidden(False)`` after it; :class:`judging` ends it too, when a hidden
    test raised. If anything was held back, one line says so.
    """
    global _quiet
    if begin and _quiet is None:
        sink = _Sink()
        shell = _shell()
        if shell is not None and _end_of_cell not in shell.events.callbacks["post_run_cell"]:
            shell.events.register("post_run_cell", _end_of_cell)  # a cell that raised still ends it
        publish = getattr(getattr(shell, "display_pub", None), "publish", None)
        if publish is not None:
            def hold(*args, **kwargs):
                sink.written += 1
            shell.display_pub.publish = hold
        _quiet = (sys.stdout, sys.stderr, publish, sink)
        sys.stdout.write(HIDDEN_BEGIN)
        sys.stdout.flush()
        sys.stdout = sys.stderr = sink
    elif not begin and _quiet is not None:
        stdout, stderr, publish, sink = _quiet
        _quiet = None
        sys.stdout, sys.stderr = stdout, stderr
        if publish is not None:
            _shell().display_pub.publish = publish
        sys.stdout.write(HIDDEN_END)
        if sink.written:
            print(HIDDEN_PRINTS)
        sys.stdout.flush()


def _end_of_cell(*args) -> None:
    _hidden(False)


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


_PLAIN = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _called_as(student, instructor):
    """``instructor``'s function, taking its arguments as ``student``'s own function takes them.

    The student's code calls the function it wrote, perhaps by keyword and with
    its own names for the parameters (``stream_gradient(model, tokens=x,
    pos=p, ...)`` where the stub says ``position``): the instructor's version
    put in its place must accept that call as the student's would. A call is
    bound to the student's signature and passed on by position, the student's
    parameters in order being the instructor's. Only plain parameters map so:
    if either side has ``*args``, ``**kwargs`` or keyword-only parameters, or
    the student's has more parameters than the instructor's, or the
    instructor's extra ones have no default, the instructor's function is
    used as it is (and a call it cannot take fails as before).

    Examples
    --------
    >>> def mine(model, tokens, pos): ...
    >>> def theirs(model, tokens, position):
    ...     return (model, tokens, position)
    >>> _called_as(mine, theirs)(1, tokens=2, pos=3)
    (1, 2, 3)
    """
    try:
        want, have = inspect.signature(student), inspect.signature(instructor)
    except (TypeError, ValueError):   # not a function (or _MISSING): nothing to follow
        return instructor
    mine, theirs = list(want.parameters.values()), list(have.parameters.values())
    if [p.name for p in mine] == [p.name for p in theirs]:
        return instructor
    if (any(p.kind not in _PLAIN for p in mine + theirs) or len(mine) > len(theirs)
            or any(p.default is p.empty for p in theirs[len(mine):])):
        return instructor

    @functools.wraps(instructor)
    def as_the_student_calls_it(*args, **kwargs):
        try:
            bound = want.bind(*args, **kwargs)
        except TypeError:   # the student's own function would refuse it too: the instructor's says why
            return instructor(*args, **kwargs)
        bound.apply_defaults()
        return instructor(*bound.args)

    as_the_student_calls_it.__signature__ = want
    return as_the_student_calls_it


class judging:
    """Run a test cell's checks on ``names`` alone.

    Inside the block, while grading, every exercise function already judged
    by an earlier test cell is the instructor's version (the student's comes
    back afterwards), so a wrong helper cannot cost the points of a right
    function that calls it. Outside grading (a student's own Jupyter, the
    instructor's notebook) the block changes nothing else. A ``NameError``
    for a judged function says that the function is missing.

    In every mode, the library functions that an exercise asks students to
    write (those that call :func:`asked`) raise :class:`Withheld` while the
    block runs, so that a judged function cannot return the library's
    answer; the block's own checks do not need them.

    Parameters
    ----------
    *names : str
        The functions (or answers) this test cell gives points for.

    Examples
    --------
    >>> def double(x):
    ...     return 2 * x
    >>> with judging("double"):
    ...     assert double(2) == 4
    """

    def __init__(self, *names: str):
        if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
            raise ValueError(f"judging needs the names of the functions judged, got {names!r}")
        self.names = names
        self._saved: dict = {}

    def __enter__(self):
        global _offered, _judged
        self._outer, _judged = _judged, self.names
        source, _offered = _offered, None
        if not source:
            return self
        user = sys._getframe(1).f_globals   # the notebook's namespace
        instructor = dict(user)             # the instructor's functions see each other
        exec(compile(source, "<the instructor's version>", "exec"), instructor)
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name not in self.names:
                self._saved[node.name] = user.get(node.name, _MISSING)
                user[node.name] = _called_as(self._saved[node.name], instructor[node.name])
        self._user = user
        return self

    def __exit__(self, kind, error, trace):
        global _judged
        withheld, _judged = _judged, getattr(self, "_outer", ())
        _hidden(False)  # a hidden test that raised did not reach the grader's line that ends its quiet
        for name, value in self._saved.items():
            if value is _MISSING:
                self._user.pop(name, None)
            else:
                self._user[name] = value
        self._saved = {}
        if isinstance(error, NameError) and getattr(error, "name", None) in self.names:
            error.args = (f"{error.name} is not defined: the cell that defines it was deleted, renamed,"
                          " not run, or raised an error",)
        if withheld != self.names and error is None:
            raise AssertionError("the checks' record of what is judged was changed while they ran:"
                                 " the library's answers must stay withheld")
        return False  # errors go on, with their own traceback
